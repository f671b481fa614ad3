//! `LiteralMatcher`: a `grep_matcher::Matcher` for one literal, single-line query. Case-sensitive:
//! `memchr::memmem`. Case-insensitive: ASCII folding for ASCII queries (`memchr2` on the first
//! byte, then compare); Unicode lowercase comparison per line otherwise.

use grep_matcher::{LineTerminator, Match, Matcher, NoCaptures, NoError};
use memchr::memmem::Finder;

#[derive(Debug)]
pub(super) enum LiteralMatcher {
    Exact(Box<Finder<'static>>),
    AsciiFold(Vec<u8>),
    UnicodeFold(String),
}

impl LiteralMatcher {
    /// `query` must be non-empty and contain no `\n` (callers check).
    pub(super) fn new(query: &str, case_sensitive: bool) -> Self {
        if case_sensitive {
            Self::Exact(Box::new(Finder::new(query.as_bytes()).into_owned()))
        } else if query.is_ascii() {
            Self::AsciiFold(query.as_bytes().to_ascii_lowercase())
        } else {
            Self::UnicodeFold(query.to_lowercase())
        }
    }

    fn find(&self, haystack: &[u8], at: usize) -> Option<Match> {
        let hay = haystack.get(at..)?;
        match self {
            Self::Exact(finder) => finder
                .find(hay)
                .map(|i| Match::new(at + i, at + i + finder.needle().len())),
            Self::AsciiFold(needle) => {
                find_ascii_fold(hay, needle).map(|i| Match::new(at + i, at + i + needle.len()))
            }
            Self::UnicodeFold(needle) => {
                // Report the whole line: lowercasing can change lengths, so a precise span inside
                // the line is not meaningful; the searcher only needs the line.
                let mut start = 0;
                while start < hay.len() {
                    let end = memchr::memchr(b'\n', &hay[start..]).map_or(hay.len(), |i| start + i);
                    let line = String::from_utf8_lossy(&hay[start..end]);
                    if line.to_lowercase().contains(needle.as_str()) {
                        return Some(Match::new(at + start, at + end));
                    }
                    start = end + 1;
                }
                None
            }
        }
    }
}

fn find_ascii_fold(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, _) = needle.split_first()?;
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    let last_start = hay.len().checked_sub(needle.len())?;
    let mut pos = 0;
    while pos <= last_start {
        let i = pos + memchr::memchr2(lower, upper, &hay[pos..=last_start])?;
        if hay[i..i + needle.len()].eq_ignore_ascii_case(needle) {
            return Some(i);
        }
        pos = i + 1;
    }
    None
}

impl Matcher for LiteralMatcher {
    type Captures = NoCaptures;
    type Error = NoError;

    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        Ok(self.find(haystack, at))
    }

    fn new_captures(&self) -> Result<NoCaptures, NoError> {
        Ok(NoCaptures::new())
    }

    /// No match ever contains `\n` (the query has none; fold matches stop at line ends), which
    /// lets the searcher use its fast whole-buffer path.
    fn line_terminator(&self) -> Option<LineTerminator> {
        Some(LineTerminator::byte(b'\n'))
    }
}
