//! RFC 8785 canonical JSON (JCS), the bytes that chain hashes, seals and receipts commit to.
//!
//! Writing: members sorted by the UTF-16 code units of their unescaped names,
//! strings escaped exactly as RFC 8785 §3.2.2.2 says, numbers as ECMAScript's
//! `Number.prototype.toString` prints them (`ryu-js`). Integers outside
//! ±(2^53 − 1), which I-JSON excludes and ECMAScript would round, keep all
//! their digits so that no stored value silently changes.
//!
//! Reading ([`check`]): a verifier accepts only bytes that are exactly the
//! canonical form of what they parse to, with no duplicate member names, so
//! every byte it hashes or checks a signature over is one it also read.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why bytes are not canonical JSON.
#[derive(Debug, thiserror::Error)]
pub enum CanonicalError {
    /// Not JSON at all (or not UTF-8), or an object names a member twice.
    #[error("not valid JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    /// Valid JSON whose canonical form differs, from this byte offset on.
    #[error("not in canonical form from byte {offset}")]
    NotCanonical { offset: usize },
}

/// The canonical bytes of a value.
pub fn to_vec(value: &Value) -> Vec<u8> {
    to_string(value).into_bytes()
}

/// The canonical text of a value.
pub fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_value_str(value, &mut out);
    out
}

/// Parses bytes that must already be canonical JSON, refusing duplicate
/// member names and any byte that differs from the canonical form.
pub fn check(bytes: &[u8]) -> Result<Value, CanonicalError> {
    let value = parse_strict(bytes)?;
    let canonical = to_vec(&value);
    if canonical != bytes {
        let offset = canonical
            .iter()
            .zip(bytes)
            .position(|(a, b)| a != b)
            .unwrap_or(canonical.len().min(bytes.len()));
        return Err(CanonicalError::NotCanonical { offset });
    }
    Ok(value)
}

/// Parses JSON, refusing an object that names a member twice (where a plain
/// parser keeps one of them and the other goes unchecked).
pub fn parse_strict(bytes: &[u8]) -> Result<Value, CanonicalError> {
    serde_json::from_slice::<Strict>(bytes)
        .map(|strict| strict.0)
        .map_err(CanonicalError::Syntax)
}

fn write_value_str(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value_str(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, (key, member)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_value_str(member, out);
            }
            out.push('}');
        }
    }
}

/// ECMAScript's shortest round-trip form (RFC 8785 §3.2.2.3).
fn write_number(n: &Number, out: &mut String) {
    if let Some(i) = n.as_i64() {
        out.push_str(&i.to_string());
    } else if let Some(u) = n.as_u64() {
        out.push_str(&u.to_string());
    } else {
        // serde_json holds no NaN or infinity; -0 prints as "0" in ECMAScript.
        let f = n.as_f64().unwrap_or(0.0);
        if f == 0.0 {
            out.push('0');
        } else {
            out.push_str(ryu_js::Buffer::new().format_finite(f));
        }
    }
}

/// RFC 8785 §3.2.2.2: `"` and `\` escaped, the controls U+0000–U+001F as the
/// short escapes where JSON has one and else `\u00xx` in lower-case hex;
/// everything else, U+007F and `/` included, as raw UTF-8.
pub fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                let b = u32::from(c) as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON value parsed with duplicate member names refused.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if members.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate member name {key:?}"
                )));
            }
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(text: &str) -> String {
        to_string(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn rfc_8785_sorting_example() {
        // RFC 8785 §3.2.3: sorted by UTF-16 code units, the emoji's high
        // surrogate 0xD83D before U+FB33.
        let text = canon(
            r#"{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",
            "1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control",
            "\u00f6":"Latin Small Letter O With Diaeresis"}"#,
        );
        let order: Vec<usize> = [
            "Carriage Return",
            "One",
            "Control",
            "Latin Small",
            "Euro Sign",
            "Emoji",
            "Hebrew",
        ]
        .iter()
        .map(|name| text.find(name).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    #[test]
    fn rfc_8785_sample_object() {
        // RFC 8785 §3.2.2, input and output as printed there.
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        assert_eq!(
            canon(input),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn rfc_8785_appendix_b_numbers() {
        let vectors: [(u64, &str); 26] = [
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x3eb0c6f7a0b5ed8e, "0.0000010000000000000002"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
            (0x3e7ad7f29abcaf48, "1e-7"),
            (0x3fb999999999999a, "0.1"),
        ];
        for (bits, expected) in vectors {
            let value = json!(f64::from_bits(bits));
            assert_eq!(to_string(&value), expected, "{bits:#018x}");
            check(expected.as_bytes()).unwrap();
        }
        for (text, expected) in [("1.0", "1"), ("-0", "0"), ("1E2", "100"), ("1e21", "1e+21")] {
            assert_eq!(canon(text), expected);
        }
    }

    #[test]
    fn a_name_sorts_before_the_names_it_prefixes() {
        // The old writer sorted by escaped UTF-8 bytes with the closing quote,
        // putting "gpt 4" before "gpt" and "a!" before "a".
        let weights = json!({"gpt 4": 0.5, "gpt": 0.25, "a!": 2, "a": 1, "a\n": 3});
        assert_eq!(
            to_string(&weights),
            r#"{"a":1,"a\n":3,"a!":2,"gpt":0.25,"gpt 4":0.5}"#
        );
    }

    #[test]
    fn strings_escape_exactly_the_controls_quote_and_backslash() {
        let text = to_string(&json!(
            "\u{0}\u{1}\u{1f}\u{8}\t\n\u{c}\r\"\\/\u{7f}\u{e9}\u{2028}\u{1F600}"
        ));
        assert_eq!(
            text,
            "\"\\u0000\\u0001\\u001f\\b\\t\\n\\f\\r\\\"\\\\/\u{7f}\u{e9}\u{2028}\u{1F600}\""
        );
        check(text.as_bytes()).unwrap();
    }

    #[test]
    fn check_accepts_canonical_bytes_and_returns_the_value() {
        let value = json!({"b": [1, 0.5, "x"], "a": {"\u{1F600}": null, "\u{FB01}": true}});
        assert_eq!(check(to_string(&value).as_bytes()).unwrap(), value);
    }

    #[test]
    fn check_refuses_duplicate_member_names() {
        for text in [
            r#"{"a":1,"a":1}"#,
            r#"{"x":{"b":1,"b":2}}"#,
            r#"[{"a":1,"a":2}]"#,
        ] {
            let err = check(text.as_bytes()).unwrap_err();
            assert!(
                matches!(&err, CanonicalError::Syntax(e) if e.to_string().contains("duplicate member name")),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn check_refuses_every_non_canonical_spelling() {
        for (text, offset) in [
            (r#"{"a": 1}"#, 5),
            (r#"{"b":1,"a":2}"#, 2),
            (r#"{"a!":1,"a":2}"#, 3),
            ("[1.0]", 2),
            ("[-0]", 1),
            ("[1E2]", 2),
            (r#""\/""#, 1),
            (r#""\u001F""#, 6),
            (r#""\u0041""#, 1),
            (r#""\u00e9""#, 1),
            ("{}\n", 2),
            ("\u{feff}{}", 0),
        ] {
            match check(text.as_bytes()) {
                Err(CanonicalError::NotCanonical { offset: at }) => {
                    assert_eq!(at, offset, "{text}")
                }
                Err(CanonicalError::Syntax(e)) => assert_eq!(offset, 0, "{text}: {e}"),
                Ok(_) => panic!("{text} accepted"),
            }
        }
        assert!(matches!(check(b"{\"a\":1"), Err(CanonicalError::Syntax(_))));
        assert!(matches!(check(b"\xff"), Err(CanonicalError::Syntax(_))));
    }

    #[test]
    fn integers_beyond_i_json_keep_their_digits() {
        for text in [
            "9007199254740993",
            "-9223372036854775808",
            "18446744073709551615",
        ] {
            assert_eq!(canon(text), text);
        }
    }
}
