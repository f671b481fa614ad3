//! The shell's lexical layer as the reader follows it: words (quotes, backslashes, `\`-newlines,
//! comments, globs) and operators, and what counts as an assignment.

/// One word of a command line, quotes and backslashes removed.
#[derive(Debug, Clone)]
pub(super) struct Word {
    pub(super) text: String,
    /// Holds an unquoted `*`, `?`, `[` or `{…,…}`: the shell expands it to files nobody can
    /// list here.
    pub(super) glob: bool,
    /// The target of a redirection (`< file`, `2> log`, `<&3`): not an argument of the
    /// command, but what it reads or writes instead of a descriptor.
    pub(super) redirect: Option<Redirect>,
}

/// What a redirection does with its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Redirect {
    /// `< file`, `0< file`, `<> file`: the command's standard input is the file (a program that
    /// reads its code from standard input runs it: `python3 < x.py`).
    Stdin,
    /// `<&N`, `0<&N`: standard input is another descriptor, whose content is unknown here.
    StdinDescriptor,
    /// `N< file`, `N<&M` for another descriptor: read by the command as data.
    Input,
    /// `> file`, `>> file`, `2>&1`, `&> file`: written, never run.
    Output,
}

/// A shell operator between words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// `;`, a newline, `!`.
    Seq,
    And,
    Or,
    Pipe,
    Background,
    /// `(`: a subshell (or a function definition's `()`).
    Open,
    Close,
    /// `{ … }`: a group, run in the same shell.
    GroupOpen,
    GroupClose,
}

#[derive(Debug, Clone)]
pub(super) enum Token {
    Word(Word),
    Op(Op),
}

/// `NAME=value` as the shell takes an assignment.
pub(super) fn assignment(text: &str) -> Option<(&str, &str)> {
    let (name, value) = text.split_once('=')?;
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, value))
}

/// The tokens of a command line as the shell splits them: words (quotes and backslashes
/// removed, `\`-newline joined, `#` comments dropped) and operators; an error for what the
/// reader does not follow (here-documents, process substitution, an open quote).
pub(super) fn split(value: &str) -> Result<Vec<Token>, &'static str> {
    let mut tokens: Vec<Token> = Vec::new();
    let mut word: Option<Word> = None;
    // The redirection the next word is the target of.
    let mut redirect: Option<Redirect> = None;
    // How many tokens there were when a redirection was read: an operator before its target is
    // a line the shell refuses.
    let mut redirect_at = 0;
    let mut quoting: Option<char> = None;
    let mut chars = value.chars().peekable();
    fn start(word: &mut Option<Word>) -> &mut Word {
        word.get_or_insert_with(|| Word {
            text: String::new(),
            glob: false,
            redirect: None,
        })
    }
    fn add(word: &mut Option<Word>, c: char) {
        start(word).text.push(c);
    }
    let end =
        |word: &mut Option<Word>, tokens: &mut Vec<Token>, redirect: &mut Option<Redirect>| {
            if let Some(mut w) = word.take() {
                w.redirect = redirect.take();
                tokens.push(Token::Word(w));
            }
        };
    while let Some(c) = chars.next() {
        if redirect.is_some() && tokens.len() > redirect_at {
            return Err("a redirection has no target");
        }
        match (quoting, c) {
            (Some(q), c) if c == q => quoting = None,
            // In double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and a newline.
            (Some('"'), '\\') => match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some(&next) if "$`\"\\".contains(next) => {
                    add(&mut word, next);
                    chars.next();
                }
                _ => {
                    add(&mut word, '\\');
                }
            },
            (Some(_), c) => {
                add(&mut word, c);
            }
            (None, '\'' | '"') => {
                start(&mut word);
                quoting = Some(c);
            }
            (None, '\\') => match chars.next() {
                // A line continuation joins the lines.
                Some('\n') | None => {}
                Some(next) => {
                    start(&mut word);
                    add(&mut word, next);
                }
            },
            (None, '#') if word.is_none() => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            (None, '\n') => {
                end(&mut word, &mut tokens, &mut redirect);
                tokens.push(Token::Op(Op::Seq));
            }
            (None, c) if c.is_whitespace() => end(&mut word, &mut tokens, &mut redirect),
            (None, '<' | '>') => {
                // `2>`, `0<`: digits written against the operator name a descriptor.
                let descriptor = word
                    .as_ref()
                    .filter(|w| !w.text.is_empty() && w.text.chars().all(|d| d.is_ascii_digit()))
                    .map(|w| w.text.clone());
                if descriptor.is_some() {
                    word = None;
                }
                end(&mut word, &mut tokens, &mut redirect);
                let stdin = c == '<' && descriptor.as_deref().is_none_or(|d| d == "0");
                let mut duplicate = false;
                match chars.peek() {
                    Some('<') if c == '<' => return Err("it feeds a command a here-document"),
                    Some('(') => return Err("it substitutes a process's output (<(…), >(…))"),
                    Some('&') => {
                        chars.next();
                        duplicate = true;
                    }
                    Some('>' | '|') => {
                        chars.next();
                    }
                    _ => {}
                }
                redirect_at = tokens.len();
                redirect = Some(match (c, stdin, duplicate) {
                    ('<', true, false) => Redirect::Stdin,
                    ('<', true, true) => Redirect::StdinDescriptor,
                    ('<', false, _) => Redirect::Input,
                    _ => Redirect::Output,
                });
            }
            (None, ';') => {
                end(&mut word, &mut tokens, &mut redirect);
                chars.next_if_eq(&';');
                tokens.push(Token::Op(Op::Seq));
            }
            // `!cmd` (an alias) or `! cmd`: a negated command, in a command's place.
            (None, '!') if word.is_none() => tokens.push(Token::Op(Op::Seq)),
            (None, '&') => {
                end(&mut word, &mut tokens, &mut redirect);
                let op = if chars.next_if_eq(&'&').is_some() {
                    Op::And
                } else if chars.next_if_eq(&'>').is_some() {
                    // `&> file`: both outputs to the file.
                    chars.next_if_eq(&'>');
                    redirect_at = tokens.len();
                    redirect = Some(Redirect::Output);
                    continue;
                } else {
                    Op::Background
                };
                tokens.push(Token::Op(op));
            }
            (None, '|') => {
                end(&mut word, &mut tokens, &mut redirect);
                let op = if chars.next_if_eq(&'|').is_some() {
                    Op::Or
                } else {
                    chars.next_if_eq(&'&');
                    Op::Pipe
                };
                tokens.push(Token::Op(op));
            }
            (None, '(') => {
                end(&mut word, &mut tokens, &mut redirect);
                tokens.push(Token::Op(Op::Open));
            }
            (None, ')') => {
                end(&mut word, &mut tokens, &mut redirect);
                tokens.push(Token::Op(Op::Close));
            }
            (None, '{') if word.is_none() && chars.peek().is_some_and(|c| c.is_whitespace()) => {
                tokens.push(Token::Op(Op::GroupOpen));
            }
            (None, '}') if word.is_none() => tokens.push(Token::Op(Op::GroupClose)),
            (None, c) => {
                start(&mut word);
                if let Some(w) = word.as_mut() {
                    w.glob |= matches!(c, '*' | '?' | '[')
                        || (c == '}' && w.text.contains('{') && w.text.contains(','));
                    w.text.push(c);
                }
            }
        }
    }
    if quoting.is_some() {
        return Err("a quote is left open");
    }
    end(&mut word, &mut tokens, &mut redirect);
    if redirect.is_some() {
        return Err("a redirection has no target");
    }
    // `[ … ]` and `[[ … ]]` are the test command, not patterns.
    for token in &mut tokens {
        if let Token::Word(w) = token
            && matches!(w.text.as_str(), "[" | "[[" | "]" | "]]")
        {
            w.glob = false;
        }
    }
    Ok(tokens)
}
