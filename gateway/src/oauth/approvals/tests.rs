//! Unit tests of the approval codes: bound to the page the owner named and opened before the
//! code, single use, expiry, the attempt limit, decided pages, and the bounded list of pages
//! opened lately that a flood can push entries out of without touching any approval.

#![allow(clippy::unwrap_used)]

use super::*;

fn seen(page: &str, client: &str) -> SeenPage {
    SeenPage {
        page: page.into(),
        digest: [0; 32],
        client_id: client.into(),
        client_name: client.into(),
        redirect_host: "chatgpt.com".into(),
        expires_at_ms: 1_000_000,
    }
}

fn page<'a>(code: &'a str, issued_at_ms: i64, digest: &'a [u8; 32]) -> PageRef<'a> {
    PageRef {
        page: code,
        issued_at_ms,
        digest,
    }
}

#[test]
fn a_code_approves_only_the_named_page_opened_before_it_once() {
    let mut a = Approvals::default();
    let (owners, strangers, later) = ([1u8; 32], [2u8; 32], [3u8; 32]);
    assert_eq!(a.new_approval_code("not a page", 0), Err(NotAPageCode));
    a.note_page(
        SeenPage {
            digest: owners,
            ..seen("abcdefgh", "ChatGPT")
        },
        0,
    );
    let (code, named, ttl, shown) = a.new_approval_code("ABCD-efgh", 1_000).unwrap();
    assert_eq!(
        (code.len(), named.as_str(), ttl),
        (9, "abcdefgh", APPROVAL_CODE_TTL)
    );
    assert_eq!(shown.unwrap().client_name, "ChatGPT");
    // Another page, or the same page code on a page opened after the code: not named, nothing
    // counted, nothing spent.
    let check = |a: &mut Approvals, p, typed: &str, at| a.check_approval_code(p, typed, at);
    assert_eq!(
        check(&mut a, page("zzzzzzzz", 0, &strangers), &code, 2),
        ApprovalCheck::NotNamed
    );
    assert_eq!(
        check(&mut a, page("abcdefgh", 1_001, &later), &code, 2),
        ApprovalCheck::NotNamed
    );
    // Its own page code typed by mistake: said so, not counted.
    assert_eq!(
        check(&mut a, page("abcdefgh", 0, &owners), "abcd-efgh", 3),
        ApprovalCheck::PageCodeTyped
    );
    assert_eq!(
        check(
            &mut a,
            page("abcdefgh", 0, &owners),
            &code.to_lowercase().replace('-', ""),
            4
        ),
        ApprovalCheck::Accepted
    );
    // Approved once: the same request again is decided, whatever is typed, and it is no longer
    // listed.
    assert!(a.decided(&owners, 5));
    assert_eq!(
        check(&mut a, page("abcdefgh", 0, &owners), &code, 5),
        ApprovalCheck::Decided
    );
    assert!(a.recent_pages(5).is_empty());
    // Expired codes approve nothing.
    let (late, ..) = a.new_approval_code("bcdefghj", 10_000).unwrap();
    let expiry = 10_000 + ms(APPROVAL_CODE_TTL);
    assert_eq!(
        check(&mut a, page("bcdefghj", 0, &later), &late, expiry),
        ApprovalCheck::NotNamed
    );
}

#[test]
fn five_wrong_codes_void_the_page_and_a_new_code_does_not_restore_them() {
    let mut a = Approvals::default();
    let digest = [7u8; 32];
    let p = page("cdefghjk", 0, &digest);
    let (first, ..) = a.new_approval_code("cdefghjk", 1).unwrap();
    for left in (2..MAX_APPROVAL_ATTEMPTS).rev() {
        assert_eq!(
            a.check_approval_code(p, "WRONG-CODE", 2),
            ApprovalCheck::Rejected {
                attempts_left: left
            }
        );
    }
    let (second, ..) = a.new_approval_code("cdefghjk", 3).unwrap();
    assert_eq!(
        a.check_approval_code(p, "WRONG-CODE", 4),
        ApprovalCheck::Rejected { attempts_left: 1 }
    );
    assert_eq!(
        a.check_approval_code(p, "WRONG-CODE", 4),
        ApprovalCheck::Locked
    );
    for code in [first, second] {
        assert_eq!(a.check_approval_code(p, &code, 5), ApprovalCheck::Decided);
    }
}

#[test]
fn a_flood_of_pages_pushes_the_list_never_an_approval_and_memory_stays_bounded() {
    let mut a = Approvals::default();
    let owners = [9u8; 32];
    a.note_page(seen("dfghjkmn", "ChatGPT"), 0);
    for i in 0..10_000 {
        a.note_page(seen(&format!("{:08}", i % 7), "stranger"), 1);
    }
    let recent = a.recent_pages(2);
    assert_eq!(recent.len(), RECENT_PAGES);
    assert!(recent.iter().all(|p| p.client_name == "stranger"));
    // Named anyway: the code says it did not see the page, and approves it.
    let (code, _, _, shown) = a.new_approval_code("dfgh-jkmn", 3).unwrap();
    assert_eq!(shown, None);
    // Wrong codes on strangers' pages count nothing and store nothing.
    for i in 0..10_000u32 {
        let d = [u8::try_from(i % 251).unwrap(); 32];
        assert_eq!(
            a.check_approval_code(page("zzzzzzzz", 0, &d), "WRONG", 4),
            ApprovalCheck::NotNamed
        );
        a.deny(page("zzzzzzzz", 0, &d), 4);
    }
    assert!(a.decided.is_empty() && a.codes.len() == 1);
    assert_eq!(
        a.check_approval_code(page("dfghjkmn", 0, &owners), &code, 5),
        ApprovalCheck::Accepted
    );
    // Only the owner's codes add entries, and at most MAX_APPROVAL_CODES live at once.
    for i in 0..10 {
        a.new_approval_code(&format!("eeeeeee{}", i % 8 + 2), 6)
            .unwrap();
    }
    assert_eq!(a.codes.len(), MAX_APPROVAL_CODES);
    assert_eq!(a.decided.len(), 1);
}
