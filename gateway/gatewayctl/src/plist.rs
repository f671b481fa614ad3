//! A minimal reader of XML property lists (launchd job files): dicts, arrays, strings, booleans;
//! other scalar types are kept as text. Binary plists are refused with advice to convert them.

/// A property list value.
#[derive(Debug, Clone, PartialEq)]
pub enum Plist {
    Dict(Vec<(String, Plist)>),
    Array(Vec<Plist>),
    String(String),
    Bool(bool),
    /// `integer`, `real`, `date`, `data`: the element name and its text.
    Other(String, String),
}

impl Plist {
    /// The value under `key` of a dict.
    pub fn get(&self, key: &str) -> Option<&Plist> {
        match self {
            Plist::Dict(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Plist::String(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Start(String),
    End(String),
    Empty(String),
    Text(String),
}

fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp..];
        let Some(semi) = after.find(';') else {
            out.push_str(after);
            return out;
        };
        let entity = &after[1..semi];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => out.push(c),
            None => out.push_str(&after[..=semi]),
        }
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    out
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let skip_to = |rest: &str, open: &str, close: &str| -> Result<usize, String> {
            rest.find(close)
                .map(|i| i + close.len())
                .ok_or_else(|| format!("unterminated {open}"))
        };
        if rest.starts_with("<!--") {
            rest = &rest[skip_to(rest, "<!--", "-->")?..];
        } else if rest.starts_with("<?") {
            rest = &rest[skip_to(rest, "<?", "?>")?..];
        } else if rest.starts_with("<!") {
            rest = &rest[skip_to(rest, "<!", ">")?..];
        } else if let Some(tag) = rest.strip_prefix("</") {
            let end = tag.find('>').ok_or("unterminated end tag")?;
            tokens.push(Token::End(tag[..end].trim().to_string()));
            rest = &tag[end + 1..];
        } else if let Some(tag) = rest.strip_prefix('<') {
            let end = tag.find('>').ok_or("unterminated tag")?;
            let inner = &tag[..end];
            let (inner, empty) = match inner.strip_suffix('/') {
                Some(i) => (i, true),
                None => (inner, false),
            };
            let name = inner
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
            tokens.push(if empty {
                Token::Empty(name)
            } else {
                Token::Start(name)
            });
            rest = &tag[end + 1..];
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            let text = &rest[..end];
            if !text.trim().is_empty() {
                tokens.push(Token::Text(decode_entities(text)));
            }
            rest = &rest[end..];
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn expect_end(&mut self, name: &str) -> Result<(), String> {
        match self.next() {
            Some(Token::End(n)) if n == name => Ok(()),
            other => Err(format!("expected </{name}>, found {other:?}")),
        }
    }

    /// Text up to `</name>` (empty if none).
    fn text_until_end(&mut self, name: &str) -> Result<String, String> {
        let text = match self.peek() {
            Some(Token::Text(t)) => {
                let t = t.clone();
                self.pos += 1;
                t
            }
            _ => String::new(),
        };
        self.expect_end(name)?;
        Ok(text)
    }

    fn value(&mut self) -> Result<Plist, String> {
        match self.next() {
            Some(Token::Empty(name)) => Ok(match name.as_str() {
                "true" => Plist::Bool(true),
                "false" => Plist::Bool(false),
                "dict" => Plist::Dict(Vec::new()),
                "array" => Plist::Array(Vec::new()),
                "string" => Plist::String(String::new()),
                other => Plist::Other(other.to_string(), String::new()),
            }),
            Some(Token::Start(name)) => match name.as_str() {
                "dict" => {
                    let mut entries = Vec::new();
                    loop {
                        match self.next() {
                            Some(Token::End(n)) if n == "dict" => break,
                            Some(Token::Start(k)) if k == "key" => {
                                let key = self.text_until_end("key")?;
                                let value = self.value()?;
                                entries.push((key, value));
                            }
                            other => {
                                return Err(format!("expected <key> in <dict>, found {other:?}"));
                            }
                        }
                    }
                    Ok(Plist::Dict(entries))
                }
                "array" => {
                    let mut items = Vec::new();
                    while !matches!(self.peek(), Some(Token::End(n)) if n == "array") {
                        items.push(self.value()?);
                    }
                    self.pos += 1;
                    Ok(Plist::Array(items))
                }
                "string" => Ok(Plist::String(self.text_until_end("string")?)),
                "true" | "false" => {
                    self.expect_end(&name)?;
                    Ok(Plist::Bool(name == "true"))
                }
                other => {
                    let text = self.text_until_end(other)?;
                    Ok(Plist::Other(other.to_string(), text.trim().to_string()))
                }
            },
            other => Err(format!("expected a value, found {other:?}")),
        }
    }
}

/// Parse an XML property list; the result is the value inside `<plist>`.
pub fn parse(text: &str) -> Result<Plist, String> {
    if text.starts_with("bplist") {
        return Err(
            "binary property list; convert it with `plutil -convert xml1 FILE` to check it"
                .to_string(),
        );
    }
    let mut parser = Parser {
        tokens: tokenize(text)?,
        pos: 0,
    };
    match parser.next() {
        Some(Token::Start(name)) if name == "plist" => {}
        other => return Err(format!("expected <plist>, found {other:?}")),
    }
    let value = parser.value()?;
    parser.expect_end("plist")?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_launchd_job() {
        let text = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <!-- a comment -->
  <key>Label</key><string>local.native-gateway</string>
  <key>ProgramArguments</key>
  <array><string>/opt/a &amp; b/gateway</string><string>serve</string></array>
  <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
  <key>AbandonProcessGroup</key><true/>
  <key>ExitTimeOut</key><integer>30</integer>
  <key>Empty</key><string/>
</dict>
</plist>"#;
        let p = parse(text).unwrap();
        assert_eq!(
            p.get("Label").and_then(Plist::as_str),
            Some("local.native-gateway")
        );
        assert_eq!(
            p.get("ProgramArguments"),
            Some(&Plist::Array(vec![
                Plist::String("/opt/a & b/gateway".into()),
                Plist::String("serve".into())
            ]))
        );
        assert_eq!(p.get("AbandonProcessGroup"), Some(&Plist::Bool(true)));
        assert!(matches!(p.get("KeepAlive"), Some(Plist::Dict(_))));
        assert_eq!(
            p.get("ExitTimeOut"),
            Some(&Plist::Other("integer".into(), "30".into()))
        );
        assert_eq!(p.get("Empty"), Some(&Plist::String(String::new())));
        assert!(parse("bplist00...").is_err());
        assert!(parse("<plist><dict><key>a</key></dict></plist>").is_err());
    }
}
