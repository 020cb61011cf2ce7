//! Device type and browser of a session, read from its User-Agent.

use agon_aggregates::account::Device;

/// Longest User-Agent kept; longer ones are cut (they are only shown back).
const MAX_AGENT_CHARS: usize = 512;

/// Classifies a User-Agent header the way a session list shows it.
pub fn describe(user_agent: Option<&str>, ip: Option<String>) -> Device {
    let agent: String = user_agent
        .unwrap_or_default()
        .chars()
        .take(MAX_AGENT_CHARS)
        .collect();
    let lower = agent.to_ascii_lowercase();
    let has = |needle: &str| lower.contains(needle);
    let device_type = if agent.is_empty() {
        "unknown"
    } else if has("bot") || has("crawler") || has("spider") {
        "bot"
    } else if has("ipad") || has("tablet") || (has("android") && !has("mobile")) {
        "tablet"
    } else if has("mobile") || has("iphone") || has("android") {
        "mobile"
    } else if has("curl/")
        || has("wget/")
        || has("python")
        || has("reqwest")
        || has("httpie")
        || has("go-http-client")
        || has("okhttp")
        || has("postman")
    {
        "api_client"
    } else {
        "desktop"
    };
    // Order matters: Edge and Opera also say Chrome, Chrome also says Safari.
    let browsers = [
        ("edg/", "Edge"),
        ("opr/", "Opera"),
        ("opera", "Opera"),
        ("firefox/", "Firefox"),
        ("chrome/", "Chrome"),
        ("chromium/", "Chromium"),
        ("safari/", "Safari"),
        ("curl/", "curl"),
        ("wget/", "Wget"),
        ("python", "Python"),
        ("reqwest", "reqwest"),
        ("postman", "Postman"),
    ];
    let browser = browsers.iter().find(|(needle, _)| has(needle)).map_or(
        if agent.is_empty() { "unknown" } else { "other" },
        |(_, name)| name,
    );
    Device {
        device_type: device_type.to_owned(),
        browser: browser.to_owned(),
        ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(agent: &str) -> (String, String) {
        let d = describe(Some(agent), None);
        (d.device_type, d.browser)
    }

    #[test]
    fn common_agents_are_recognised() {
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            kind(
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36 Edg/120.0"
            ),
            pair("desktop", "Edge")
        );
        assert_eq!(
            kind(
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
            ),
            pair("mobile", "Safari")
        );
        assert_eq!(
            kind("Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"),
            pair("desktop", "Firefox")
        );
        assert_eq!(kind("curl/8.4.0"), pair("api_client", "curl"));
        assert_eq!(
            kind(
                "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 Chrome/120.0 Safari/537.36"
            ),
            pair("tablet", "Chrome")
        );
        assert_eq!(describe(None, None).device_type, "unknown");
    }
}
