//! The agent names a deployment seats, as one regular expression, so that
//! the OpenAPI document tells clients which names a create will accept.

use regex::Regex;

use super::route::{ALIASES, EXPLICIT, FAMILIES, Provider};

/// The pattern and its compiled form.
#[derive(Debug)]
pub struct NamePattern {
    source: String,
    /// Always compiles (the words are fixed); `None` would match nothing.
    regex: Option<Regex>,
}

impl NamePattern {
    pub fn new(usable: impl Fn(Provider) -> bool) -> Self {
        let source = pattern(usable);
        let regex = Regex::new(&source).ok();
        Self { source, regex }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn is_match(&self, name: &str) -> bool {
        self.regex.as_ref().is_some_and(|r| r.is_match(name))
    }
}

/// Characters of a model name in the pattern's (lower-case) spelling.
const MODEL_CHARS: &str = "[a-z0-9._-]";

/// Every name the pattern matches resolves to a provider `usable` accepts.
/// Names are in lower case (only the model of `provider:model` keeps its
/// case) and without surrounding spaces, so that a list whose items must be
/// unique holds no two names that seat the same agent.
fn pattern(usable: impl Fn(Provider) -> bool) -> String {
    let mut forms = vec![format!("demo(?:-{MODEL_CHARS}+)?")];
    let words = |table: &[(&[&str], Provider)]| -> Vec<String> {
        table
            .iter()
            .filter(|(_, provider)| usable(*provider))
            .flat_map(|(words, _)| words.iter().map(|w| escape(w)))
            .collect()
    };
    forms.extend(words(&ALIASES));
    forms.extend(words(&FAMILIES).into_iter().map(|prefix| {
        // `claude-` needs a model after the dash; `o1` is a model itself.
        let more = if prefix.ends_with('-') { '+' } else { '*' };
        format!("{prefix}{MODEL_CHARS}{more}")
    }));
    let explicit = words(&EXPLICIT);
    if !explicit.is_empty() {
        forms.push(format!(
            "(?:{}):[A-Za-z0-9._/-]+(?::[A-Za-z0-9._-]+)?",
            explicit.join("|")
        ));
    }
    format!("^(?:{})$", forms.join("|"))
}

fn escape(word: &str) -> String {
    word.replace('.', "\\.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::route::{parse, tests::settings};

    fn matches(pattern: &NamePattern, name: &str) -> bool {
        pattern.is_match(name)
    }

    #[test]
    fn every_name_the_pattern_matches_resolves_with_those_keys() {
        for keys in [false, true] {
            let settings = settings(keys);
            let pattern = NamePattern::new(|p| p.configured(&settings));
            let names = [
                "demo",
                "demo-a",
                "demo-x.1_b",
                "claude",
                "claude-opus-4-1",
                "gpt",
                "o1",
                "o3-mini",
                "codestral-latest",
                "openai:gpt-4o-mini",
                "ollama:llama3.1:8b",
                "openrouter:meta-llama/llama-3.1-70b-instruct",
                "grok-4",
                "local",
                "vllm:Qwen/Qwen2.5-7B",
            ];
            for name in names {
                let demo = name.starts_with("demo");
                assert_eq!(matches(&pattern, name), keys || demo, "{name}");
                if matches(&pattern, name) {
                    let route = crate::agents::route::resolve(name, &settings);
                    assert!(route.is_ok(), "{name}: {route:?}");
                }
            }
            for refused in [
                "", "demo-", "Demo", "demo-A", "bob", "demo:x", "openai:", " demo", "demo ",
                "gpt4", "Claude", "demo-a*",
            ] {
                assert!(!matches(&pattern, refused), "{refused:?}");
            }
            assert!(parse("demo-a").is_ok());
        }
    }
}
