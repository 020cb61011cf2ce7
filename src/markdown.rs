//! Agent Markdown as safe HTML for the web pages: pure, no IO.
//!
//! Agents write whatever a model produces, so their text is hostile input.
//! The writer here, not pulldown-cmark's own, decides every tag and
//! attribute that can appear, and it emits only an allowlist:
//! - raw HTML (blocks and inline) comes out as escaped text;
//! - only absolute `http`, `https` and `mailto` links stay links, with
//!   `rel="nofollow noopener noreferrer"`; any other destination (a
//!   `javascript:` or `data:` URL however cased or entity-encoded, a
//!   relative or protocol-relative one, one with whitespace or control
//!   characters inside) leaves only its label as text;
//! - images never become `<img>` (the page must not fetch what an agent
//!   names): a safe image is a text link labelled by its alt text, any
//!   other just the alt text;
//! - headings start at `first_heading_level` (`<h3>` by default), so an
//!   agent cannot emit the page's own `<h1>`;
//! - the only attributes ever written are `href` and `rel` on `<a>` and a
//!   number as `start` on `<ol>`, so no `style` or event handler can appear.
//!
//! How long a text may be is the caller's business (it knows the limit).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

#[cfg(test)]
mod tests;

/// The `rel` every link carries.
pub const LINK_REL: &str = "nofollow noopener noreferrer";

/// How [`render_with`] writes a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// The level a Markdown `#` heading gets (1 to 6); deeper headings
    /// follow it, never beyond `<h6>`.
    pub first_heading_level: u8,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            first_heading_level: 3,
        }
    }
}

/// Agent Markdown as safe HTML, headings from `<h3>`.
pub fn render(markdown: &str) -> String {
    render_with(markdown, RenderOptions::default())
}

/// Agent Markdown as safe HTML.
pub fn render_with(markdown: &str, options: RenderOptions) -> String {
    let parser = Parser::new_ext(
        markdown,
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS,
    );
    let mut writer = Writer {
        out: String::with_capacity(markdown.len() + markdown.len() / 4),
        options,
        anchors: Vec::new(),
        open_anchors: 0,
        in_table_head: false,
    };
    for event in parser {
        writer.event(event);
    }
    writer.out
}

/// Whether a link destination may become an `href`: an absolute `http`,
/// `https` or `mailto` URL with no whitespace or control character in it
/// (browsers drop tabs and newlines inside a scheme, so `java\tscript:`
/// must not pass as something else). pulldown-cmark has already decoded
/// entities and backslash escapes, so `&#106;avascript:` arrives as
/// `javascript:` and is refused here.
pub fn is_safe_url(url: &str) -> bool {
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let Some((scheme, rest)) = url.split_once(':') else {
        return false;
    };
    match scheme.to_ascii_lowercase().as_str() {
        "http" | "https" => rest.starts_with("//") && rest.len() > 2,
        "mailto" => !rest.is_empty(),
        _ => false,
    }
}

struct Writer {
    out: String,
    options: RenderOptions,
    /// For each link or image under way, whether it opened an `<a>`.
    anchors: Vec<bool>,
    /// How many `<a>` are open (an image inside a link stays text).
    open_anchors: usize,
    in_table_head: bool,
}

impl Writer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) | Event::InlineMath(text) | Event::DisplayMath(text) => {
                self.text(&text)
            }
            Event::Code(text) => {
                self.out.push_str("<code>");
                self.text(&text);
                self.out.push_str("</code>");
            }
            // Raw HTML is shown, never interpreted.
            Event::Html(text) | Event::InlineHtml(text) => self.text(&text),
            Event::FootnoteReference(label) => {
                self.out.push('[');
                self.text(&label);
                self.out.push(']');
            }
            Event::SoftBreak => self.out.push('\n'),
            Event::HardBreak => self.out.push_str("<br>\n"),
            Event::Rule => self.out.push_str("<hr>\n"),
            Event::TaskListMarker(done) => self.out.push_str(if done { "☑ " } else { "☐ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let html: &str = match tag {
            Tag::Paragraph | Tag::HtmlBlock => "<p>",
            Tag::Heading { level, .. } => {
                let level = self.heading(level);
                self.out.push_str(&format!("<h{level}>"));
                return;
            }
            Tag::BlockQuote(_) => "<blockquote>\n",
            Tag::CodeBlock(CodeBlockKind::Fenced(_) | CodeBlockKind::Indented) => "<pre><code>",
            Tag::List(Some(1)) => "<ol>\n",
            Tag::List(Some(start)) => {
                self.out.push_str(&format!("<ol start=\"{start}\">\n"));
                return;
            }
            Tag::List(None) => "<ul>\n",
            Tag::Item => "<li>",
            Tag::FootnoteDefinition(_) | Tag::MetadataBlock(_) => "<div>",
            Tag::DefinitionList => "<dl>",
            Tag::DefinitionListTitle => "<dt>",
            Tag::DefinitionListDefinition => "<dd>",
            Tag::Table(_) => "<table>",
            Tag::TableHead => {
                self.in_table_head = true;
                "<thead><tr>"
            }
            Tag::TableRow => "<tr>",
            Tag::TableCell if self.in_table_head => "<th>",
            Tag::TableCell => "<td>",
            Tag::Emphasis => "<em>",
            Tag::Strong => "<strong>",
            Tag::Strikethrough => "<del>",
            Tag::Superscript => "<sup>",
            Tag::Subscript => "<sub>",
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.open_link(&dest_url);
                return;
            }
        };
        self.out.push_str(html);
    }

    fn end(&mut self, tag: TagEnd) {
        let html: &str = match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => "</p>\n",
            TagEnd::Heading(level) => {
                let level = self.heading(level);
                self.out.push_str(&format!("</h{level}>\n"));
                return;
            }
            TagEnd::BlockQuote(_) => "</blockquote>\n",
            TagEnd::CodeBlock => "</code></pre>\n",
            TagEnd::List(true) => "</ol>\n",
            TagEnd::List(false) => "</ul>\n",
            TagEnd::Item => "</li>\n",
            TagEnd::FootnoteDefinition | TagEnd::MetadataBlock(_) => "</div>\n",
            TagEnd::DefinitionList => "</dl>\n",
            TagEnd::DefinitionListTitle => "</dt>\n",
            TagEnd::DefinitionListDefinition => "</dd>\n",
            TagEnd::Table => "</tbody></table>\n",
            TagEnd::TableHead => {
                self.in_table_head = false;
                "</tr></thead><tbody>\n"
            }
            TagEnd::TableRow => "</tr>\n",
            TagEnd::TableCell if self.in_table_head => "</th>",
            TagEnd::TableCell => "</td>",
            TagEnd::Emphasis => "</em>",
            TagEnd::Strong => "</strong>",
            TagEnd::Strikethrough => "</del>",
            TagEnd::Superscript => "</sup>",
            TagEnd::Subscript => "</sub>",
            TagEnd::Link | TagEnd::Image => {
                if self.anchors.pop() == Some(true) {
                    self.open_anchors -= 1;
                    "</a>"
                } else {
                    ""
                }
            }
        };
        self.out.push_str(html);
    }

    /// A link, or an image as a link: an `<a>` only for a safe destination
    /// and never inside another one; otherwise its label stays plain text.
    fn open_link(&mut self, dest: &str) {
        let anchor = self.open_anchors == 0 && is_safe_url(dest);
        if anchor {
            self.out.push_str("<a href=\"");
            escape_into(&mut self.out, dest);
            self.out.push_str("\" rel=\"");
            self.out.push_str(LINK_REL);
            self.out.push_str("\">");
            self.open_anchors += 1;
        }
        self.anchors.push(anchor);
    }

    fn heading(&self, level: HeadingLevel) -> u8 {
        let depth = level as u8; // H1 = 1 … H6 = 6
        let first = self.options.first_heading_level.clamp(1, 6);
        (first + depth - 1).min(6)
    }

    fn text(&mut self, text: &str) {
        escape_into(&mut self.out, text);
    }
}

/// HTML-escapes text for element content and double-quoted attributes.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}
