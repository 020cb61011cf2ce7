//! Real identity providers on loopback (`tests/idp/`, started with Node),
//! and a browser: an HTTP client that keeps cookies per host, follows
//! redirects and posts the sign-in form, as a person's browser would.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::Mutex;

use reqwest::header::{ACCEPT, COOKIE, LOCATION, SET_COOKIE};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::free_port;

/// `oidc-provider` (OpenID Certified), configured by `tests/idp/oidc.mjs`.
pub struct OidcProvider {
    pub issuer: String,
    _child: tokio::process::Child,
}

impl OidcProvider {
    /// Starts the provider with `clients` (oidc-provider client metadata).
    pub async fn start(clients: &Value) -> Self {
        let (child, issuer) = node("oidc.mjs", "oidc-provider", &[clients.to_string()]).await;
        Self {
            issuer,
            _child: child,
        }
    }

    /// Makes the provider misbehave (`tampered`, `wrong_audience`,
    /// `expired`, `rotated`, `unknown_key`) or behave (`normal`).
    pub async fn mode(&self, mode: &str) {
        let answer = reqwest::Client::new()
            .post(format!("{}/__mode", self.issuer))
            .form(&[("mode", mode)])
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
    }
}

/// A SAML 2.0 identity provider (samlify), configured by `tests/idp/saml.mjs`,
/// with its signing pair and a stranger's made by `openssl` for the test.
#[cfg(feature = "saml")]
pub struct SamlIdp {
    pub base: String,
    /// The directory of `idp.key`, `idp.pem`, `stranger.*` and `sp.*`.
    pub keys: tempfile::TempDir,
    _child: tokio::process::Child,
}

#[cfg(feature = "saml")]
impl SamlIdp {
    pub async fn start() -> Self {
        let keys = tempfile::tempdir().unwrap();
        for name in ["idp", "stranger", "sp"] {
            let status = tokio::process::Command::new("openssl")
                .current_dir(keys.path())
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args([
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.pem"),
                ])
                .args(["-subj", &format!("/CN=agon-test-{name}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await
                .expect("openssl");
            assert!(status.success(), "openssl made no {name} pair");
        }
        let keys_dir = keys.path().to_string_lossy().into_owned();
        let (child, base) = node("saml.mjs", "samlify", &[keys_dir]).await;
        Self {
            base,
            keys,
            _child: child,
        }
    }

    /// A file of the keys directory.
    pub fn file(&self, name: &str) -> String {
        self.keys.path().join(name).to_string_lossy().into_owned()
    }

    /// Hands the provider the service's metadata address.
    pub async fn trust(&self, metadata_url: &str) {
        self.post("/__sp", &[("metadata_url", metadata_url)]).await;
    }

    /// Makes the provider attack or misbehave (`unsigned`, `wrong_cert`,
    /// `sha1`, `wrapped`, `wrapped_inside`, `comment`, `doctype`,
    /// `replay_id`, `expired`, `wrong_audience`, `no_audience`) or behave
    /// (`normal`).
    pub async fn mode(&self, mode: &str) {
        self.post("/__mode", &[("mode", mode)]).await;
    }

    /// The provider's signed (or unsigned) logout request for `name_id`:
    /// its id and the service's address carrying it.
    pub async fn logout_request(&self, name_id: &str, signed: bool) -> (String, String) {
        let mut url = url::Url::parse(&format!("{}/__logout", self.base)).unwrap();
        url.query_pairs_mut().append_pair("name_id", name_id);
        if !signed {
            url.query_pairs_mut().append_pair("unsigned", "1");
        }
        let made: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        (
            made["id"].as_str().unwrap().to_owned(),
            made["url"].as_str().unwrap().to_owned(),
        )
    }

    /// The logout messages the provider received.
    pub async fn logouts(&self) -> Value {
        reqwest::get(format!("{}/__logouts", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) {
        let answer = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .form(form)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{path}: {}", answer.status());
    }
}

/// Starts `script` of `tests/idp` (whose `package` must be installed) on a
/// free port with `args`; the child and the address from its first line
/// (`ready <address>`). Its later output is drained, since a closed pipe
/// would end it.
async fn node(script: &str, package: &str, args: &[String]) -> (tokio::process::Child, String) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/idp");
    assert!(
        std::path::Path::new(dir)
            .join("node_modules")
            .join(package)
            .exists(),
        "run `npm ci` in tests/idp first (ops/test.sh does)"
    );
    let mut child = tokio::process::Command::new("node")
        .current_dir(dir)
        .arg(script)
        .arg(free_port().to_string())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
        .await
        .expect("the identity provider did not start in 30 s")
        .unwrap()
        .unwrap_or_default();
    let address = ready
        .strip_prefix("ready ")
        .unwrap_or_else(|| panic!("unexpected first line from the identity provider: {ready}"))
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, address)
}

/// A browser: cookies per host, redirects followed by hand.
pub struct Browser {
    http: reqwest::Client,
    cookies: Mutex<HashMap<String, BTreeMap<String, String>>>,
    /// Sent as `Authorization` to the service only (for link and logout).
    pub bearer: Option<(String, String)>,
}

/// Where a walk through redirects ended.
#[derive(Debug)]
pub struct Landed {
    pub url: String,
    /// Every URL visited on the way, the last one included.
    pub visited: Vec<String>,
    /// The fields of the form about to be posted to `url`, when a form led
    /// there (a SAML response on its way to the service, say).
    #[cfg_attr(not(feature = "saml"), allow(dead_code))]
    pub form: Option<Vec<(String, String)>>,
}

impl Landed {
    /// The fragment's fields (`#a=b&c=d`).
    pub fn fragment(&self) -> BTreeMap<String, String> {
        let fragment = self.url.split_once('#').map_or("", |(_, f)| f);
        url::form_urlencoded::parse(fragment.as_bytes())
            .into_owned()
            .collect()
    }

    /// The query's `error`, when the walk ended at the error address.
    pub fn error(&self) -> Option<String> {
        let url = url::Url::parse(&self.url).ok()?;
        url.query_pairs()
            .find(|(key, _)| key == "error")
            .map(|(_, value)| value.into_owned())
    }
}

impl Default for Browser {
    fn default() -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: Mutex::default(),
            bearer: None,
        }
    }
}

impl Browser {
    fn authority(url: &str) -> String {
        let url = url::Url::parse(url).unwrap();
        format!(
            "{}:{}",
            url.host_str().unwrap(),
            url.port_or_known_default().unwrap()
        )
    }

    fn prepare(&self, request: reqwest::RequestBuilder, url: &str) -> reqwest::RequestBuilder {
        let authority = Self::authority(url);
        let mut request = request.header(ACCEPT, "text/html,application/xhtml+xml");
        if let Some(jar) = self.cookies.lock().unwrap().get(&authority)
            && !jar.is_empty()
        {
            let header = jar
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join("; ");
            request = request.header(COOKIE, header);
        }
        if let Some((origin, token)) = &self.bearer
            && url.starts_with(origin.as_str())
        {
            request = request.bearer_auth(token);
        }
        request
    }

    fn keep_cookies(&self, url: &str, response: &reqwest::Response) {
        let authority = Self::authority(url);
        let mut jars = self.cookies.lock().unwrap();
        let jar = jars.entry(authority).or_default();
        for header in response.headers().get_all(SET_COOKIE) {
            let text = header.to_str().unwrap_or_default();
            let pair = text.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty()
                    || text
                        .to_ascii_lowercase()
                        .contains("expires=thu, 01 jan 1970")
                {
                    jar.remove(name.trim());
                } else {
                    jar.insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
    }

    /// GETs `url`, answering the provider's sign-in form as `login`, and
    /// follows redirects and forms until one leads to an address starting
    /// with one of `stops` (not fetched).
    pub async fn walk(&self, url: &str, login: &str, stops: &[&str]) -> Landed {
        self.go(url.to_owned(), None, login, stops).await
    }

    /// POSTs `fields` as a form to `url`, then walks on as [`Browser::walk`].
    #[cfg_attr(not(feature = "saml"), allow(dead_code))]
    pub async fn post(&self, url: &str, fields: Vec<(String, String)>, stops: &[&str]) -> Landed {
        self.go(url.to_owned(), Some(fields), "", stops).await
    }

    async fn go(
        &self,
        mut next: String,
        mut form: Option<Vec<(String, String)>>,
        login: &str,
        stops: &[&str],
    ) -> Landed {
        let mut visited = Vec::new();
        for _ in 0..20 {
            visited.push(next.clone());
            if stops.iter().any(|stop| next.starts_with(stop)) {
                return Landed {
                    url: next,
                    visited,
                    form,
                };
            }
            let request = match form.take() {
                Some(fields) => self.prepare(self.http.post(&next), &next).form(&fields),
                None => self.prepare(self.http.get(&next), &next),
            };
            let response = request.send().await.unwrap();
            self.keep_cookies(&next, &response);
            let status = response.status();
            if status.is_redirection() {
                let location = response.headers()[LOCATION].to_str().unwrap().to_owned();
                next = url::Url::parse(&next)
                    .unwrap()
                    .join(&location)
                    .unwrap()
                    .to_string();
                continue;
            }
            let body = response.text().await.unwrap_or_default();
            assert!(
                status.is_success(),
                "{next} answered {status}: {body} (visited {visited:?})"
            );
            let action = body
                .split("action=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(unescape)
                .unwrap_or_else(|| panic!("no form at {next}: {body}"));
            next = url::Url::parse(&next)
                .unwrap()
                .join(&action)
                .unwrap()
                .to_string();
            let mut fields = hidden_fields(&body);
            if body.contains("name=\"login\"") {
                fields.push(("login".to_owned(), login.to_owned()));
                fields.push(("password".to_owned(), "correct horse".to_owned()));
            }
            form = Some(fields);
        }
        panic!("too many redirects: {visited:?}");
    }
}

/// The hidden inputs of a page's form, as a browser would post them.
fn hidden_fields(body: &str) -> Vec<(String, String)> {
    let attribute = |tag: &str, name: &str| {
        tag.split(&format!("{name}=\"")[..])
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(unescape)
    };
    body.split("<input")
        .skip(1)
        .map(|tag| tag.split('>').next().unwrap_or_default())
        .filter(|tag| tag.contains("type=\"hidden\""))
        .filter_map(|tag| Some((attribute(tag, "name")?, attribute(tag, "value")?)))
        .collect()
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
