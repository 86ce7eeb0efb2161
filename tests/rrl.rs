//! Response rate limiting in the fallback, with a real client: `dig` from
//! a limited prefix gets TC and its answer over TCP; `dig` with a valid
//! server cookie from the same prefix is answered over UDP.

use crate::support::Server;

#[test]
fn a_limited_client_gets_tc_and_retries_over_tcp_and_a_cookie_is_exempt() {
    // One response a second per /24 and class, every limited one slipped.
    let srv = Server::start_example(
        "",
        "[rrl]\nenabled = true\nresponses_per_second = 1\nslip = 1\n",
    );
    let answered = |out: &str| out.contains("status: NOERROR") && out.contains("192.0.2.80");
    let first = srv.dig(&["+nocookie", "www.example.com", "A"]);
    assert!(answered(&first) && !first.contains("Truncated"), "{first}");
    // The prefix's credit is spent: TC, and dig gets the answer over TCP.
    let second = srv.dig(&["+nocookie", "www.example.com", "A"]);
    assert!(
        second.contains("Truncated, retrying in TCP mode"),
        "{second}"
    );
    assert!(answered(&second), "{second}");
    // A cookie exchange (over TCP after the slip) gives dig the server
    // cookie; with it, the same prefix is answered over UDP.
    let third = srv.dig(&["+cookie", "www.example.com", "A"]);
    let cookie = third
        .lines()
        .find_map(|l| l.strip_prefix("; COOKIE: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no COOKIE in {third}"))
        .to_string();
    assert_eq!(cookie.len(), 48, "client and server cookie: {third}");
    for _ in 0..3 {
        let out = srv.dig(&[&format!("+cookie={cookie}"), "www.example.com", "A"]);
        assert!(answered(&out) && !out.contains("Truncated"), "{out}");
        assert!(out.contains("(good)"), "the server cookie was valid: {out}");
    }
    // Without the cookie: still limited.
    let again = srv.dig(&["+nocookie", "www.example.com", "A"]);
    assert!(again.contains("Truncated"), "{again}");
}
