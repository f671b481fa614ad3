//! Shell text split as the owner's shell splits it, never run: simple commands of words, each
//! word the pieces the shell joins into one (quoted and unquoted text, parameters, command
//! substitutions), so `'-Mlib='"$HOME"'/lib'`, `pl"i"b` and `pl\ib` are read as the words the
//! shell makes (red team 36 B1). One reader for the `.envrc`, `.env` and shell start-up files:
//! what each piece expands to is the caller's to decide.

/// The language of a file: POSIX shells (bash, zsh, sh, direnv) or fish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Posix,
    Fish,
}

/// One piece of a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Piece {
    /// Text the shell leaves as it is; `quoted` when quoted or escaped (no `~` expansion, no
    /// pattern).
    Text { text: String, quoted: bool },
    /// `$NAME`, `${NAME}`.
    Var(String),
    /// `${NAME:-word}` and its kin (`-`, `:+`, `+`, `:=`, `=`, `:?`, `?`) and the pattern
    /// removals (`%`, `%%`, `#`, `##`): the operator and the word's text (read again as a word).
    VarOr {
        name: String,
        op: String,
        word: String,
    },
    /// `$(…)`, `` `…` `` (fish: `(…)`, `$(…)`): the command's text.
    Command(String),
    /// Any other expansion (`$1`, `$@`, `${#x}`, `${x%y}`, `$((…))`, `$'…'`, fish's `$x[1]`),
    /// as written: what it gives is not read here.
    Other(String),
    /// An array's elements after an assignment's `=` (`NAME=(a "b c")`, zsh's `path+=(~/bin)`,
    /// bash's `PROMPT_COMMAND=(…)`).
    Array(Vec<Word>),
}

/// A word: its pieces, joined by the shell without a break.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Word {
    pub(super) pieces: Vec<Piece>,
}

impl Word {
    /// The word's text when it holds no expansion.
    pub(super) fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text { text, .. } => out.push_str(text),
                _ => return None,
            }
        }
        Some(out)
    }

    /// Whether unquoted text holds a pattern the shell expands to files (`*`, `?`, `[`, or a
    /// brace list `{a,b}`), or starts with `~`.
    pub(super) fn is_pattern_or_tilde(&self) -> bool {
        let unquoted: String = self
            .pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Text {
                    text,
                    quoted: false,
                } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let starts_tilde = matches!(
            self.pieces.first(),
            Some(Piece::Text { text, quoted: false }) if text.starts_with('~')
        );
        starts_tilde
            || unquoted.contains(['*', '?', '['])
            || (unquoted.contains('{') && unquoted.contains(','))
    }

    /// Whether the word is an assignment (`NAME=value`, `NAME+=value`, its name unquoted).
    pub(super) fn is_assignment(&self) -> bool {
        let Some(Piece::Text {
            text,
            quoted: false,
        }) = self.pieces.first()
        else {
            return false;
        };
        let Some((name, _)) = text.split_once('=') else {
            return false;
        };
        let name = name.strip_suffix('+').unwrap_or(name);
        is_variable_name(name)
    }

    /// Whether the word so far is `NAME=` or `NAME+=` (unquoted), where `(` opens an array.
    fn assigns(&self) -> bool {
        let [
            Piece::Text {
                text,
                quoted: false,
            },
        ] = self.pieces.as_slice()
        else {
            return false;
        };
        let name = text
            .strip_suffix("+=")
            .or_else(|| text.strip_suffix('='))
            .unwrap_or("");
        is_variable_name(name)
    }

    /// A quote opened: an empty pair still makes a word (`''`, `""`).
    fn open_quote(&mut self) {
        self.pieces.push(Piece::Text {
            text: String::new(),
            quoted: true,
        });
    }

    fn text(&mut self, c: char, quoted: bool) {
        if let Some(Piece::Text { text, quoted: q }) = self.pieces.last_mut()
            && *q == quoted
        {
            text.push(c);
            return;
        }
        self.pieces.push(Piece::Text {
            text: c.to_string(),
            quoted,
        });
    }
}

/// Whether `name` is a shell variable's name (a letter or `_`, then letters, digits, `_`).
pub(super) fn is_variable_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Words that begin a compound command or chain one, dropped in front of a simple command
/// (`if has nix; then use nix; fi`, fish's `and set -x …`).
const LEADING_KEYWORDS: [&str; 15] = [
    "then", "do", "else", "elif", "if", "while", "until", "!", "{", "(", "and", "or", "not",
    "begin", "time",
];

/// The simple commands of `text`, each as its words: lines joined at a trailing backslash,
/// comments dropped, commands separated by newlines, `;`, `&`, `|`, `(`, `)` outside quotes,
/// redirections and their targets dropped, leading keywords ([`LEADING_KEYWORDS`]) dropped.
pub(super) fn commands(text: &str, dialect: Dialect) -> Vec<Vec<Word>> {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        at: 0,
        dialect,
        targets: false,
    };
    lexer.commands()
}

/// [`commands`] with each redirection's target kept as a word of its command (`< .env.local`:
/// a file the command reads), and then the commands of every command substitution in them, as
/// deep as `depth` (what a file's text makes its shell read, red team 39 finding 1).
pub(super) fn commands_reading(text: &str, dialect: Dialect, depth: usize) -> Vec<Vec<Word>> {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        at: 0,
        dialect,
        targets: true,
    };
    let mut out = Vec::new();
    for command in lexer.commands() {
        if depth > 0 {
            for piece in command.iter().flat_map(|word| &word.pieces) {
                if let Piece::Command(inner) = piece {
                    out.extend(commands_reading(inner, dialect, depth - 1));
                }
            }
        }
        out.push(command);
    }
    out
}

/// `text` read as one word, blanks and operators included (the word of `${X:-word}`).
pub(super) fn word(text: &str, dialect: Dialect) -> Word {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        at: 0,
        dialect,
        targets: false,
    };
    let mut word = Word::default();
    while lexer.at < lexer.chars.len() {
        lexer.piece(&mut word, true);
    }
    word
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    dialect: Dialect,
    /// Keep redirections' targets as words ([`commands_reading`]).
    targets: bool,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn commands(&mut self) -> Vec<Vec<Word>> {
        let mut commands = Vec::new();
        let mut words: Vec<Word> = Vec::new();
        let mut word: Option<Word> = None;
        // The next word is a redirection's target, not an argument.
        let mut target = false;
        let keep_targets = self.targets;
        let end_word = |word: &mut Option<Word>, words: &mut Vec<Word>, target: &mut bool| {
            if let Some(w) = word.take()
                && (!std::mem::take(target) || keep_targets)
            {
                words.push(w);
            }
        };
        let end_command = |words: &mut Vec<Word>, commands: &mut Vec<Vec<Word>>| {
            while words.first().and_then(Word::literal).is_some_and(|w| {
                LEADING_KEYWORDS.contains(&w.as_str())
                    && matches!(
                        words[0].pieces.first(),
                        Some(Piece::Text { quoted: false, .. })
                    )
            }) {
                let keyword = words.remove(0);
                // bash's `time -p cmd`: the keyword's own option.
                if keyword.literal().as_deref() == Some("time")
                    && words.first().and_then(Word::literal).as_deref() == Some("-p")
                {
                    words.remove(0);
                }
            }
            if !words.is_empty() {
                commands.push(std::mem::take(words));
            }
        };
        while let Some(c) = self.peek(0) {
            match c {
                '\\' if self.peek(1) == Some('\n') => self.at += 2,
                '#' if word.is_none() => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '\n' | ';' | '&' | '|' | ')' => {
                    self.at += 1;
                    end_word(&mut word, &mut words, &mut target);
                    end_command(&mut words, &mut commands);
                }
                // `NAME=(…)`, `NAME+=(…)`: an array assigned (red team 40's open shape: bash's
                // `PROMPT_COMMAND=('. ./x')` and zsh's `path=(…)` were read as nothing).
                '(' if self.dialect == Dialect::Posix
                    && word.as_ref().is_some_and(Word::assigns) =>
                {
                    self.at += 1;
                    let inner = self.balanced('(', ')');
                    let elements = Lexer {
                        chars: inner.chars().collect(),
                        at: 0,
                        dialect: self.dialect,
                        targets: false,
                    }
                    .commands()
                    .into_iter()
                    .flatten()
                    .collect();
                    if let Some(word) = word.as_mut() {
                        word.pieces.push(Piece::Array(elements));
                    }
                }
                // fish has no subshell: its `(…)` is a command substitution, read as a piece.
                '(' if self.dialect == Dialect::Posix => {
                    self.at += 1;
                    end_word(&mut word, &mut words, &mut target);
                    end_command(&mut words, &mut commands);
                }
                '<' | '>' => {
                    // `2>`: the digits written against the operator name a descriptor.
                    if word
                        .as_ref()
                        .and_then(Word::literal)
                        .is_some_and(|w| w.chars().all(|d| d.is_ascii_digit()))
                    {
                        word = None;
                    }
                    end_word(&mut word, &mut words, &mut target);
                    while self.peek(0).is_some_and(|c| "<>&|".contains(c)) {
                        self.at += 1;
                    }
                    target = true;
                }
                // Not `\r`: bash keeps it in the word (a CRLF file's `lib\r` is another name).
                c if c == ' ' || c == '\t' => {
                    self.at += 1;
                    end_word(&mut word, &mut words, &mut target);
                }
                _ => self.piece(word.get_or_insert_with(Word::default), false),
            }
        }
        end_word(&mut word, &mut words, &mut target);
        end_command(&mut words, &mut commands);
        commands
    }

    /// Read one piece of a word at the cursor: a quoted string, an escape, an expansion or one
    /// character of text. `blanks` (a word read whole): blanks and operators are text.
    fn piece(&mut self, word: &mut Word, blanks: bool) {
        let Some(c) = self.peek(0) else {
            return;
        };
        self.at += 1;
        match c {
            '\'' => self.single_quoted(word),
            '"' => self.double_quoted(word),
            '\\' => match self.peek(0) {
                Some('\n') => self.at += 1,
                Some(next) => {
                    self.at += 1;
                    word.text(next, true);
                }
                None => word.text('\\', true),
            },
            '$' => self.dollar(word, false),
            '`' if self.dialect == Dialect::Posix => {
                let inner = self.until_backtick();
                word.pieces.push(Piece::Command(inner));
            }
            '(' if self.dialect == Dialect::Fish && !blanks => {
                let inner = self.balanced('(', ')');
                word.pieces.push(Piece::Command(inner));
            }
            c => word.text(c, false),
        }
    }

    /// After `'`: POSIX takes everything to the next `'`; fish also `\'` and `\\`.
    fn single_quoted(&mut self, word: &mut Word) {
        word.open_quote();
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                '\'' => return,
                '\\' if self.dialect == Dialect::Fish
                    && matches!(self.peek(0), Some('\'' | '\\')) =>
                {
                    let next = self.peek(0).unwrap_or('\\');
                    self.at += 1;
                    word.text(next, true);
                }
                c => word.text(c, true),
            }
        }
    }

    /// After `"`: text with `$` expansions (and POSIX's `` `…` ``); a backslash escapes only
    /// `$`, `` ` ``, `"`, `\` and a newline.
    fn double_quoted(&mut self, word: &mut Word) {
        word.open_quote();
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                '"' => return,
                '\\' => match self.peek(0) {
                    Some('\n') => self.at += 1,
                    Some(next) if "$`\"\\".contains(next) => {
                        self.at += 1;
                        word.text(next, true);
                    }
                    _ => word.text('\\', true),
                },
                '$' => self.dollar(word, true),
                '`' if self.dialect == Dialect::Posix => {
                    let inner = self.until_backtick();
                    word.pieces.push(Piece::Command(inner));
                }
                c => word.text(c, true),
            }
        }
    }

    /// After `$`: a parameter, a substitution, or a plain `$`.
    fn dollar(&mut self, word: &mut Word, quoted: bool) {
        let name_start = |c: char| c.is_ascii_alphabetic() || c == '_';
        let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
        match self.peek(0) {
            Some('(') if self.peek(1) == Some('(') && self.dialect == Dialect::Posix => {
                self.at += 1;
                let inner = self.balanced('(', ')');
                word.pieces.push(Piece::Other(format!("$({inner})")));
            }
            Some('(') => {
                self.at += 1;
                let inner = self.balanced('(', ')');
                word.pieces.push(Piece::Command(inner));
            }
            Some('{') if self.dialect == Dialect::Posix => {
                self.at += 1;
                let inner = self.balanced('{', '}');
                word.pieces.push(braced(&inner));
            }
            // `$"…"`: bash's locale-translated string, read as the double-quoted one (red team 40).
            Some('"') if !quoted && self.dialect == Dialect::Posix => {
                self.at += 1;
                self.double_quoted(word);
            }
            Some('\'') if !quoted && self.dialect == Dialect::Posix => {
                // `$'…'`: ANSI-C quoting, its escapes decoded as the shell decodes them.
                self.at += 1;
                word.pieces.push(Piece::Text {
                    text: self.ansi_c(),
                    quoted: true,
                });
            }
            Some(c) if name_start(c) => {
                let mut name = String::new();
                while let Some(c) = self.peek(0).filter(|c| name_char(*c)) {
                    name.push(c);
                    self.at += 1;
                }
                if self.dialect == Dialect::Fish && self.peek(0) == Some('[') {
                    self.at += 1;
                    let index = self.balanced('[', ']');
                    word.pieces.push(Piece::Other(format!("${name}[{index}]")));
                } else {
                    word.pieces.push(Piece::Var(name));
                }
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.at += 1;
                word.pieces.push(Piece::Other(format!("${c}")));
            }
            _ => word.text('$', quoted),
        }
    }

    /// After `$'`: the text up to the closing `'`, escapes decoded (`\n`, `\xHH`, octal,
    /// `\uHHHH`, `\cX`…); an escape bash does not know keeps its backslash.
    fn ansi_c(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.at += 1;
            if c == '\'' {
                break;
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let Some(e) = self.peek(0) else {
                out.push('\\');
                break;
            };
            self.at += 1;
            let simple = match e {
                'n' => Some('\n'),
                't' => Some('\t'),
                'r' => Some('\r'),
                'a' => Some('\u{7}'),
                'b' => Some('\u{8}'),
                'e' | 'E' => Some('\u{1b}'),
                'f' => Some('\u{c}'),
                'v' => Some('\u{b}'),
                '\\' | '\'' | '"' | '?' => Some(e),
                _ => None,
            };
            if let Some(c) = simple {
                out.push(c);
                continue;
            }
            let (radix, max) = match e {
                'x' => (16, 2),
                'u' => (16, 4),
                'U' => (16, 8),
                '0'..='7' => {
                    self.at -= 1;
                    (8, 3)
                }
                'c' => {
                    if let Some(x) = self.peek(0) {
                        self.at += 1;
                        out.push(char::from((u32::from(x) & 0x1f) as u8));
                    }
                    continue;
                }
                _ => {
                    out.push('\\');
                    out.push(e);
                    continue;
                }
            };
            let mut digits = String::new();
            while digits.len() < max && self.peek(0).is_some_and(|d| d.is_digit(radix)) {
                digits.extend(self.peek(0));
                self.at += 1;
            }
            match u32::from_str_radix(&digits, radix)
                .ok()
                .and_then(char::from_u32)
            {
                Some(c) => out.push(c),
                None => {
                    out.push('\\');
                    out.push(e);
                    out.push_str(&digits);
                }
            }
        }
        out
    }

    /// The text up to the `close` that balances an `open` already read (quotes respected).
    fn balanced(&mut self, open: char, close: char) -> String {
        let mut depth = 1;
        let mut out = String::new();
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"') | None, '\\') => {
                    out.push(c);
                    if let Some(next) = self.peek(0) {
                        self.at += 1;
                        out.push(next);
                    }
                    continue;
                }
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, c) if c == open => depth += 1,
                (None, c) if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return out;
                    }
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }

    /// After `` ` ``: the text up to the next unescaped backtick.
    fn until_backtick(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                '`' => break,
                '\\' => {
                    if let Some(next) = self.peek(0) {
                        self.at += 1;
                        if !"$`\\".contains(next) {
                            out.push('\\');
                        }
                        out.push(next);
                    }
                }
                c => out.push(c),
            }
        }
        out
    }
}

/// Most words one brace expansion makes; past it one word not read ([`Piece::Other`]).
const MAX_BRACE_WORDS: usize = 64;

/// The words `word` makes by brace expansion, as the shell expands an argument: `{a,b}` (an
/// unquoted brace pair holding an unquoted comma at its own level) gives each alternative, and
/// in fish also a pair holding an expansion (`{$HOME}/lib` is `$HOME/lib`, red team 40's open
/// shape); `{a..c}` sequences are not read (a [`Piece::Other`]). Bash does not expand a bare
/// assignment's value; its callers decide where this applies.
pub(super) fn brace_expand(word: &Word, dialect: Dialect) -> Vec<Word> {
    /// A character of unquoted text, or any other piece whole.
    #[derive(Clone)]
    enum Token {
        Char(char),
        Piece(Piece),
    }
    fn tokens(word: &Word) -> Vec<Token> {
        let mut out = Vec::new();
        for piece in &word.pieces {
            match piece {
                Piece::Text {
                    text,
                    quoted: false,
                } => out.extend(text.chars().map(Token::Char)),
                piece => out.push(Token::Piece(piece.clone())),
            }
        }
        out
    }
    fn word_of(tokens: &[Token]) -> Word {
        let mut word = Word::default();
        for token in tokens {
            match token {
                Token::Char(c) => word.text(*c, false),
                Token::Piece(piece) => word.pieces.push(piece.clone()),
            }
        }
        word
    }
    /// The first expandable pair at or after `from`: its `{`, its top-level commas, its `}`.
    fn pair(tokens: &[Token], from: usize, dialect: Dialect) -> Option<(usize, Vec<usize>, usize)> {
        for open in from..tokens.len() {
            if !matches!(tokens[open], Token::Char('{')) {
                continue;
            }
            let (mut depth, mut commas, mut expansion) = (0usize, Vec::new(), false);
            for (at, token) in tokens.iter().enumerate().skip(open + 1) {
                match token {
                    Token::Char('{') => depth += 1,
                    Token::Char('}') if depth > 0 => depth -= 1,
                    Token::Char('}') => {
                        let fish_var = dialect == Dialect::Fish && expansion;
                        if !commas.is_empty() || fish_var {
                            return Some((open, commas, at));
                        }
                        break;
                    }
                    Token::Char(',') if depth == 0 => commas.push(at),
                    Token::Piece(Piece::Var(_) | Piece::Other(_) | Piece::Command(_)) => {
                        expansion = true
                    }
                    _ => {}
                }
            }
        }
        None
    }
    fn go(tokens: Vec<Token>, dialect: Dialect, out: &mut Vec<Word>) {
        if out.len() > MAX_BRACE_WORDS {
            return;
        }
        let Some((open, commas, close)) = pair(&tokens, 0, dialect) else {
            out.push(word_of(&tokens));
            return;
        };
        let mut bounds = vec![open];
        bounds.extend(&commas);
        bounds.push(close);
        for window in bounds.windows(2) {
            let mut next = tokens[..open].to_vec();
            next.extend_from_slice(&tokens[window[0] + 1..window[1]]);
            next.extend_from_slice(&tokens[close + 1..]);
            go(next, dialect, out);
        }
    }
    let tokens = tokens(word);
    // `{a..c}`, `{1..9..2}`: a sequence (bash, zsh), not read.
    let text: String = tokens
        .iter()
        .map(|t| match t {
            Token::Char(c) => *c,
            Token::Piece(_) => '\0',
        })
        .collect();
    if dialect == Dialect::Posix
        && let Some(open) = text.find('{')
        && text[open..].find('}').is_some_and(|close| {
            let inner = &text[open + 1..open + close];
            inner.contains("..") && !inner.contains(',')
        })
    {
        return vec![Word {
            pieces: vec![Piece::Other(text)],
        }];
    }
    let mut out = Vec::new();
    go(tokens, dialect, &mut out);
    if out.len() > MAX_BRACE_WORDS {
        return vec![Word {
            pieces: vec![Piece::Other("{…}".to_string())],
        }];
    }
    out
}

/// What `${inner}` is: a parameter, a parameter with a default or alternative, or another
/// expansion.
fn braced(inner: &str) -> Piece {
    let name_len = inner
        .char_indices()
        .take_while(|(i, c)| {
            c.is_ascii_alphanumeric() && (*i > 0 || !c.is_ascii_digit()) || *c == '_'
        })
        .count();
    let (name, rest) = inner.split_at(name_len);
    if name.is_empty() {
        return Piece::Other(format!("${{{inner}}}"));
    }
    if rest.is_empty() {
        return Piece::Var(name.to_string());
    }
    for op in [
        ":-", ":+", ":=", ":?", "-", "+", "=", "?", "%%", "%", "##", "#",
    ] {
        if let Some(word) = rest.strip_prefix(op) {
            return Piece::VarOr {
                name: name.to_string(),
                op: op.to_string(),
                word: word.to_string(),
            };
        }
    }
    Piece::Other(format!("${{{inner}}}"))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
