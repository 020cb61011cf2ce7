//! Hostile Markdown in, inert HTML out: exact outputs for the known
//! attacks, and every output (also of random input) checked tag by tag
//! against the writer's allowlist.

use super::{LINK_REL, RenderOptions, is_safe_url, render, render_with};

const TAGS: [&str; 24] = [
    "p",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "pre",
    "code",
    "ol",
    "ul",
    "li",
    "div",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "em",
    "strong",
    "del",
    "a",
    "br",
    "hr",
];

/// Every tag in `html` is on the allowlist with only the attributes the
/// writer may set; returns the `href`s found. Panics with the output on a
/// breach.
fn check(html: &str) -> Vec<String> {
    let mut hrefs = Vec::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        let close = after
            .find('>')
            .unwrap_or_else(|| panic!("unclosed tag in {html:?}"));
        let inside = &after[..close];
        rest = &after[close + 1..];
        let inside = inside.strip_prefix('/').unwrap_or(inside);
        let (name, mut attrs) = inside.split_once(' ').unwrap_or((inside, ""));
        assert!(TAGS.contains(&name), "tag <{name}> in {html:?}");
        while !attrs.is_empty() {
            let (key, value) = attrs
                .split_once("=\"")
                .unwrap_or_else(|| panic!("bare attribute {attrs:?} in {html:?}"));
            let (value, next) = value.split_once('"').expect("quoted value");
            match (name, key) {
                ("a", "href") => {
                    let url = value.replace("&amp;", "&");
                    assert!(is_safe_url(&url), "href {value:?} in {html:?}");
                    hrefs.push(url);
                }
                ("a", "rel") => assert_eq!(value, LINK_REL),
                ("ol", "start") => assert!(value.chars().all(|c| c.is_ascii_digit())),
                _ => panic!("attribute {key} on <{name}> in {html:?}"),
            }
            attrs = next.trim_start();
        }
    }
    let lower = html.to_ascii_lowercase();
    for banned in ["<script", "<img", "<iframe", "<style", "<h1", "<h2"] {
        assert!(!lower.contains(banned), "{banned} in {html:?}");
    }
    hrefs
}

#[test]
fn raw_html_is_text() {
    assert_eq!(
        render("<img src=x onerror=alert(1)>"),
        "<p>&lt;img src=x onerror=alert(1)&gt;</p>\n"
    );
    assert_eq!(
        render("hi <script>alert(1)</script> there"),
        "<p>hi &lt;script&gt;alert(1)&lt;/script&gt; there</p>\n"
    );
    let html = render("<a href=\"javascript:alert(1)\" onclick=\"x()\">go</a>");
    check(&html);
    assert!(html.contains("&lt;a href=&quot;javascript:alert(1)&quot;"));
    let html = render("<div style=\"color:red\">\n\n**b**\n\n</div>");
    check(&html);
    assert!(html.contains("&lt;div style=&quot;color:red&quot;&gt;"));
    assert!(html.contains("<strong>b</strong>"));
}

#[test]
fn only_web_and_mail_links_stay_links() {
    assert_eq!(
        render("[x](https://example.invalid/a?b=1&c=2)"),
        format!(
            "<p><a href=\"https://example.invalid/a?b=1&amp;c=2\" rel=\"{LINK_REL}\">x</a></p>\n"
        )
    );
    assert_eq!(
        render("[mail](mailto:someone@example.invalid)"),
        format!("<p><a href=\"mailto:someone@example.invalid\" rel=\"{LINK_REL}\">mail</a></p>\n")
    );
    for hostile in [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "[x](&#x6A;avascript&colon;alert(1))",
        "[x](java%0ascript:alert(1))",
        "[x](<java\tscript:alert(1)>)",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "[x](//evil.invalid/x)",
        "[x](/relative/path)",
        "[x](https:evil)",
        "[x]( javascript:alert(1))",
        "[x][r]\n\n[r]: javascript:alert(1)",
    ] {
        let html = render(hostile);
        assert!(check(&html).is_empty(), "{hostile:?} kept a link: {html}");
        assert!(html.contains('x'), "{hostile:?} lost its label: {html}");
    }
}

#[test]
fn images_never_load() {
    assert_eq!(
        render("![a chart](http://example.invalid/x.png)"),
        format!("<p><a href=\"http://example.invalid/x.png\" rel=\"{LINK_REL}\">a chart</a></p>\n")
    );
    assert_eq!(
        render("![i](javascript:alert(1))"),
        "<p>i</p>\n",
        "an unsafe image is its alt text"
    );
    let html = render("[![i](https://example.invalid/i.png)](https://example.invalid/)");
    assert_eq!(
        check(&html),
        ["https://example.invalid/"],
        "no <a> in an <a>"
    );
}

#[test]
fn autolinks_follow_the_same_rule() {
    let html = render("see <https://example.invalid/x> or <mailto:a@example.invalid>");
    assert_eq!(
        check(&html),
        ["https://example.invalid/x", "mailto:a@example.invalid"]
    );
    let html = render("<javascript:alert(1)>");
    assert!(check(&html).is_empty(), "{html}");
}

#[test]
fn headings_are_demoted() {
    assert_eq!(render("# Top\n## Next"), "<h3>Top</h3>\n<h4>Next</h4>\n");
    assert_eq!(render("###### Deep"), "<h6>Deep</h6>\n");
    let options = RenderOptions {
        first_heading_level: 2,
    };
    assert_eq!(render_with("# Top", options), "<h2>Top</h2>\n");
    let options = RenderOptions {
        first_heading_level: 0,
    };
    assert_eq!(
        render_with("# Top", options),
        "<h1>Top</h1>\n",
        "clamped to 1"
    );
}

#[test]
fn code_is_escaped() {
    assert_eq!(
        render("```html\n<script>alert(1)</script>\n```"),
        "<pre><code>&lt;script&gt;alert(1)&lt;/script&gt;\n</code></pre>\n"
    );
    assert_eq!(
        render("`<b onclick=x>`"),
        "<p><code>&lt;b onclick=x&gt;</code></p>\n"
    );
}

#[test]
fn tables_and_nested_lists() {
    let html = render("| a | <b>b</b> |\n|:--|--:|\n| 1 | [x](javascript:y) |\n");
    check(&html);
    assert_eq!(
        html,
        "<table><thead><tr><th>a</th><th>&lt;b&gt;b&lt;/b&gt;</th></tr></thead><tbody>\n\
         <tr><td>1</td><td>x</td></tr>\n</tbody></table>\n"
    );
    let html = render("1. one\n   - a\n   - [ ] b\n2. two\n\ntext\n\n7. seven");
    check(&html);
    assert!(
        html.starts_with(
            "<ol>\n<li>one<ul>\n<li>a</li>\n<li>☐ b</li>\n</ul>\n</li>\n<li>two</li>\n</ol>"
        ),
        "{html}"
    );
    assert!(html.contains("<ol start=\"7\">"));
}

#[test]
fn quotes_are_escaped_in_text_and_links() {
    let html = render("[\"q\"](https://example.invalid/\"onmouseover=\"x)");
    check(&html);
    assert!(!html.contains("\"onmouseover"), "{html}");
}

/// A small xorshift generator: random strings drawn from Markdown and HTML
/// pieces that matter, so that odd combinations come up often.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const PIECES: [&str; 40] = [
    "<",
    ">",
    "[",
    "]",
    "(",
    ")",
    "!",
    "`",
    "```",
    "*",
    "_",
    "#",
    "|",
    "-",
    ":",
    "\"",
    "'",
    "&",
    "\n",
    "\n\n",
    " ",
    "\t",
    "javascript:",
    "JaVaScRiPt:",
    "&#106;",
    "&#x3a;",
    "data:",
    "https://e.invalid",
    "mailto:a@b",
    "//",
    "<img src=x onerror=alert(1)>",
    "<script>",
    "</a>",
    "<a href=",
    "onerror=",
    "style=",
    "x",
    "1.",
    "    ",
    "\\",
];

#[test]
fn random_input_stays_inert() {
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3_000 {
        let len = random.next() % 40;
        let text: String = (0..len)
            .map(|_| PIECES[(random.next() % PIECES.len() as u64) as usize])
            .collect();
        let html = render(&text);
        check(&html);
    }
}
