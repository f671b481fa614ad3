//! Tests of the skill id syntax, the normalisation a pin covers, and front-matter stripping.

use super::*;

#[test]
fn ids_are_one_segment_under_a_known_scope() {
    let ok = SkillId::parse("personal:review-1.2_x").unwrap();
    assert_eq!(ok.scope, SkillScope::Personal);
    assert_eq!(ok.name, "review-1.2_x");
    assert_eq!(
        SkillId::parse("project:a").unwrap().scope,
        SkillScope::Project
    );
    for (id, expected) in [
        ("review", SkillIdError::Scope),
        ("user:review", SkillIdError::Scope),
        ("Personal:review", SkillIdError::Scope),
        ("personal:", SkillIdError::Empty),
        ("project:a/b", SkillIdError::NotASegment),
        ("project:..", SkillIdError::NotASegment),
        ("project:.", SkillIdError::NotASegment),
        ("project:a..b", SkillIdError::NotASegment),
        ("project:/etc", SkillIdError::NotASegment),
        ("project:a\\b", SkillIdError::NotASegment),
        ("project:a b", SkillIdError::NotASegment),
        ("project:a\0", SkillIdError::NotASegment),
        ("project:~", SkillIdError::NotASegment),
        ("project:é", SkillIdError::NotASegment),
        ("personal:a:b", SkillIdError::NotASegment),
    ] {
        assert_eq!(SkillId::parse(id), Err(expected), "{id:?}");
    }
    let long = format!("project:{}", "a".repeat(MAX_SKILL_NAME_BYTES + 1));
    assert_eq!(SkillId::parse(&long), Err(SkillIdError::TooLong));
}

#[test]
fn the_pin_ignores_bom_and_line_end_style() {
    let lf = b"line one\nline two\n".as_slice();
    let pin = content_sha256(lf);
    assert_eq!(pin, crate::hash::sha256_hex(lf));
    for variant in [
        b"\xEF\xBB\xBFline one\r\nline two\r\n".as_slice(),
        b"line one\rline two\r",
        b"line one\r\nline two\n",
    ] {
        assert_eq!(content_sha256(variant), pin);
    }
    // Only a leading BOM goes; other bytes count.
    assert_ne!(content_sha256(b"line one\nline two\n\n"), pin);
    assert_eq!(normalise(b"a\r\r\nb"), b"a\n\nb");
    assert!(is_pin(&pin));
    assert!(!is_pin(&pin.to_uppercase()));
    assert!(!is_pin(&pin[1..]));
}

#[test]
fn front_matter_is_dropped_from_the_instructions_but_pinned() {
    let file = b"---\r\nname: x\r\nallowed-tools: Bash\r\n---  \r\nDo this.\r\n";
    let parsed = parse_skill_file(file).unwrap();
    assert_eq!(parsed.instructions, "Do this.\n");
    assert_eq!(parsed.content_sha256, content_sha256(file));
    let plain = parse_skill_file(b"Just text\n---\nmore\n").unwrap();
    assert_eq!(plain.instructions, "Just text\n---\nmore\n");
    assert_eq!(
        parse_skill_file(b"---\nname: x\nno end\n"),
        Err(SkillFileError::UnclosedFrontMatter)
    );
    assert_eq!(
        parse_skill_file(b"---"),
        Err(SkillFileError::UnclosedFrontMatter)
    );
    assert_eq!(parse_skill_file(b"---\n---\n").unwrap().instructions, "");
}

#[test]
fn content_must_be_bounded_utf8_text() {
    assert_eq!(parse_skill_file(b"\xFF\xFE"), Err(SkillFileError::NotUtf8));
    assert_eq!(parse_skill_file(b"a\0b"), Err(SkillFileError::Nul));
    let big = vec![b'a'; MAX_SKILL_FILE_BYTES as usize + 1];
    assert_eq!(
        parse_skill_file(&big),
        Err(SkillFileError::TooLarge(MAX_SKILL_FILE_BYTES + 1))
    );
    assert!(parse_skill_file(&big[1..]).is_ok());
}
