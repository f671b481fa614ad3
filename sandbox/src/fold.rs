//! How a case- and normalisation-insensitive file system (APFS, HFS+) compares names: the one
//! folding of a name into its comparison key, shared by the path policy and the auto-run rules.

use unicode_normalization::UnicodeNormalization;

/// Comparison key of a name on a case- and normalisation-insensitive file system: the name as
/// UTF-8 (invalid bytes become U+FFFD), without the code points HFS+ ignores, decomposed (NFD),
/// case folded per character (upper case, then lower case: `ß`/`SS`, `σ`/`ς`/`Σ` and the Kelvin
/// sign/`k` all meet) and decomposed again. It may equate names the file system keeps apart;
/// for protected paths that refuses more, never less.
pub fn fold_insensitive(name: &[u8]) -> Vec<u8> {
    if name.is_ascii() {
        return name.to_ascii_lowercase();
    }
    let text = String::from_utf8_lossy(name);
    let cased: String = text
        .chars()
        .filter(|c| !is_hfs_ignorable(*c))
        .nfd()
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect();
    cased.nfd().collect::<String>().into_bytes()
}

/// Code points HFS+ leaves out when comparing names: zero-width joiners and marks, bidi
/// embedding controls, deprecated format characters and the byte order mark.
fn is_hfs_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}'
    )
}
