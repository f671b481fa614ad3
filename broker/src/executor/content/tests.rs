//! Unit tests of `NewContent`: both hashes equal a plain SHA-256 wherever the change is, a new file
//! has no old hash, and replaced pieces keep the unchanged prefix.

use super::*;

fn check(old: &[u8], content: &NewContent<'_>) {
    let expected_new = content.to_vec(old);
    let (pre, computed) = hash_around(Some(old), || Ok::<_, ()>(7), |_| content);
    assert_eq!(pre.as_deref(), Some(sha256_hex(old).as_str()));
    let (seven, post) = computed.unwrap();
    assert_eq!(seven, 7);
    assert_eq!(post, sha256_hex(&expected_new), "len {}", old.len());
}

#[test]
fn both_hashes_equal_plain_sha256_wherever_the_change_is() {
    for len in [0, 1, 63, 64, 65, CHECKPOINT - 1, CHECKPOINT, CHECKPOINT + 1] {
        let old: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        check(&old, &NewContent::whole(b"entirely new".as_slice()));
        check(&old, &NewContent::whole(old.clone()));
    }
    // Large enough for the second thread, with edits at the start, on a checkpoint, just
    // after one, in the middle, at the end, and several (replace_all).
    let len = 5 * CHECKPOINT + 123;
    assert!(len >= PARALLEL_HASH_BYTES);
    let old: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    for at in [0, CHECKPOINT, CHECKPOINT + 1, len / 2, len - 3] {
        check(&old, &NewContent::replaced(len, &[at..at + 3], b"XY"));
        check(&old, &NewContent::replaced(len, &[at..at + 3], b""));
    }
    // An insertion equal to the bytes after it: the old run that follows is shifted, not
    // unchanged, though the inserted bytes match.
    let copy = old[CHECKPOINT..CHECKPOINT + 2].to_vec();
    check(
        &old,
        &NewContent::replaced(len, &[CHECKPOINT..CHECKPOINT + 1], &copy),
    );
    let several = [10..12, CHECKPOINT * 2..CHECKPOINT * 2 + 5, len - 1..len];
    check(
        &old,
        &NewContent::replaced(len, &several, b"long replacement"),
    );
    // Files ending exactly on a checkpoint, on the two-thread path: appended to, and with
    // their last byte changed.
    for exact in [PARALLEL_HASH_BYTES, 6 * CHECKPOINT] {
        let old: Vec<u8> = (0..exact).map(|i| (i % 251) as u8).collect();
        let mut appended = old.clone();
        appended.extend_from_slice(b"more");
        check(&old, &NewContent::whole(appended));
        check(
            &old,
            &NewContent::replaced(exact, &[exact - 1..exact], b"!"),
        );
        check(&old, &NewContent::replaced(exact, &[exact..exact], b"tail"));
    }
    // A Write that keeps a long prefix, and one that only appends.
    let mut rewritten = old.clone();
    rewritten[3 * CHECKPOINT + 7] ^= 1;
    check(&old, &NewContent::whole(rewritten));
    let mut appended = old.clone();
    appended.extend_from_slice(b"tail");
    check(&old, &NewContent::whole(appended));
    check(&old, &NewContent::whole(old[..len - 1].to_vec()));
}

#[test]
fn a_new_file_has_no_old_hash() {
    let content = NewContent::whole(b"hello".as_slice());
    let (pre, computed) = hash_around(None, || Ok::<_, ()>(()), |_| &content);
    assert_eq!(pre, None);
    assert_eq!(computed.unwrap().1, sha256_hex(b"hello"));
    // A failed computation still gets the old bytes' hash (for `sha256_mismatch`).
    let (pre, computed) = hash_around(Some(b"old"), || Err::<(), _>("no"), |_| &content);
    assert_eq!(pre, Some(sha256_hex(b"old")));
    assert_eq!(computed, Err("no"));
}

#[test]
fn replaced_pieces_and_unchanged_prefix() {
    let old = b"abcabcabc";
    let content = NewContent::replaced(old.len(), &[0..1, 3..4, 6..7], b"xy");
    assert_eq!(content.to_vec(old), b"xybcxybcxybc");
    assert_eq!(content.len(), 12);
    assert_eq!(content.unchanged_prefix(old), 0);
    let content = NewContent::replaced(old.len(), &[4..5], b"b");
    assert_eq!(content.unchanged_prefix(old), old.len());
    assert_eq!(content.runs(), 3);
    let deleted = NewContent::replaced(old.len(), &[0..old.len()], b"");
    assert!(deleted.is_empty());
    assert_eq!(deleted.runs(), 0);
    assert_eq!(
        NewContent::whole(b"abcabd".as_slice()).unchanged_prefix(old),
        5
    );
    assert_eq!(common_prefix_len(&[7; 9000], &[7; 9000]), 9000);
    let mut b = vec![7; 9000];
    b[8191] = 0;
    assert_eq!(common_prefix_len(&[7; 9000], &b), 8191);
}
