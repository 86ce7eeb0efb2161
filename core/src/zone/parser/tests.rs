//! Zone-file parser tests: directives, escapes, every type, errors.

use super::rdata::rdata_from_wire;
use super::*;
use hickory_proto::rr::rdata::{A, AAAA, CNAME, MX, NS, NULL, PTR, SRV, TXT};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};

const FILE: &str = "zones/x.zone";

fn origin() -> Name {
    Name::from_ascii("example.com.").unwrap()
}

fn name(text: &str) -> Name {
    Name::from_ascii(text).unwrap()
}

fn parse(text: &str) -> Vec<SourceRecord> {
    parse_zone_str(text, &origin(), Path::new(FILE)).unwrap_or_else(|e| panic!("{e}"))
}

fn error(text: &str) -> String {
    match parse_zone_str(text, &origin(), Path::new(FILE)) {
        Ok(records) => panic!("expected an error, got {records:?}"),
        Err(e) => e.to_string(),
    }
}

fn only(text: &str) -> Record {
    let mut records = parse(text);
    assert_eq!(records.len(), 1, "{records:?}");
    records.remove(0).record
}

fn wire(rdata: &RData) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut encoder = BinEncoder::new(&mut buf);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    rdata.emit(&mut encoder).unwrap();
    buf
}

fn labels(name: &Name) -> Vec<Vec<u8>> {
    name.iter().map(<[u8]>::to_vec).collect()
}

// --- basic records and names -----------------------------------------

#[test]
fn basic_types() {
    let records = parse(
        "$TTL 300\n\
         @        IN A     192.0.2.1\n\
         www         AAAA  2001:db8::1\n\
         @           NS    ns1\n\
         @           NS    ns2.example.net.\n\
         alias       CNAME www\n\
         1.2         PTR   host.example.org.\n\
         @           MX    10 mail\n\
         _sip._tcp   SRV   1 2 5060 sip\n",
    );
    let got: Vec<(Name, RData, usize)> = records
        .iter()
        .map(|r| (r.record.name.clone(), r.record.data.clone(), r.line))
        .collect();
    let expected = vec![
        (name("example.com."), RData::A(A::new(192, 0, 2, 1)), 2),
        (
            name("www.example.com."),
            RData::AAAA(AAAA("2001:db8::1".parse().unwrap())),
            3,
        ),
        (
            name("example.com."),
            RData::NS(NS(name("ns1.example.com."))),
            4,
        ),
        (
            name("example.com."),
            RData::NS(NS(name("ns2.example.net."))),
            5,
        ),
        (
            name("alias.example.com."),
            RData::CNAME(CNAME(name("www.example.com."))),
            6,
        ),
        (
            name("1.2.example.com."),
            RData::PTR(PTR(name("host.example.org."))),
            7,
        ),
        (
            name("example.com."),
            RData::MX(MX::new(10, name("mail.example.com."))),
            8,
        ),
        (
            name("_sip._tcp.example.com."),
            RData::SRV(SRV::new(1, 2, 5060, name("sip.example.com."))),
            9,
        ),
    ];
    assert_eq!(got, expected);
    for r in &records {
        assert_eq!(r.record.ttl, 300);
        assert_eq!(r.record.dns_class, hickory_proto::rr::DNSClass::IN);
        assert!(r.record.name.is_fqdn());
        assert_eq!(&*r.file, Path::new(FILE));
    }
}

#[test]
fn names_keep_case_and_absolute_names_are_not_extended() {
    let rec = only("$TTL 1\nWWW.Example.ORG. CNAME Target\n");
    assert!(rec.name.eq_case(&name("WWW.Example.ORG.")));
    let RData::CNAME(target) = &rec.data else {
        panic!("{rec:?}")
    };
    assert!(target.0.eq_case(&name("Target.example.com.")));
}

#[test]
fn root_and_wildcard_names() {
    let records = parse("$TTL 1\n. NS a.root.\n*.dyn A 192.0.2.9\n");
    assert!(records[0].record.name.is_root());
    assert_eq!(records[1].record.name, name("*.dyn.example.com."));
    assert!(records[1].record.name.is_wildcard());
}

#[test]
fn type_class_and_keywords_are_case_insensitive() {
    let rec = only("www 60 in a 192.0.2.1\n");
    assert_eq!(rec.data, RData::A(A::new(192, 0, 2, 1)));
    let rec = only("www 60 class1 type1 192.0.2.1\n");
    assert_eq!(rec.data, RData::A(A::new(192, 0, 2, 1)));
    let rec = only("$ttl 5\n$origin example.net.\nwww a 192.0.2.1\n");
    assert_eq!((rec.ttl, rec.name), (5, name("www.example.net.")));
}

#[test]
fn ttl_and_class_in_either_order() {
    let records = parse(
        "a 100 IN A 192.0.2.1\n\
         b IN 200 A 192.0.2.2\n\
         c 300 A 192.0.2.3\n\
         d IN A 192.0.2.4\n",
    );
    let ttls: Vec<u32> = records.iter().map(|r| r.record.ttl).collect();
    assert_eq!(ttls, [100, 200, 300, 300]);
}

#[test]
fn owner_inheritance() {
    let records = parse(
        "$TTL 60\n\
         www A 192.0.2.1\n\
         \tA 192.0.2.2\n\
         ; a comment line does not change the owner\n\
         \n   TXT \"hi\"\n\
         other A 192.0.2.3\n\
         \x20 60 IN A 192.0.2.4\n",
    );
    let owners: Vec<String> = records.iter().map(|r| r.record.name.to_ascii()).collect();
    assert_eq!(
        owners,
        [
            "www.example.com.",
            "www.example.com.",
            "www.example.com.",
            "other.example.com.",
            "other.example.com."
        ]
    );
    let lines: Vec<usize> = records.iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 3, 6, 7, 8]);
}

#[test]
fn blank_owner_without_previous_owner_is_an_error() {
    assert_eq!(
        error("$TTL 60\n  A 192.0.2.1\n"),
        "zones/x.zone:2: line starts with blank space but there is no previous owner name"
    );
}

#[test]
fn origin_directive_absolute_and_relative() {
    let records = parse(
        "$TTL 1\n\
         a A 192.0.2.1\n\
         $ORIGIN sub\n\
         b A 192.0.2.2\n\
         @ A 192.0.2.3\n\
         $ORIGIN example.org.\n\
         c MX 1 @\n",
    );
    assert_eq!(records[0].record.name, name("a.example.com."));
    assert_eq!(records[1].record.name, name("b.sub.example.com."));
    assert_eq!(records[2].record.name, name("sub.example.com."));
    assert_eq!(records[3].record.name, name("c.example.org."));
    assert_eq!(
        records[3].record.data,
        RData::MX(MX::new(1, name("example.org.")))
    );
}

#[test]
fn origin_without_trailing_dot_is_treated_as_absolute() {
    let recs = parse_zone_str(
        "$TTL 1\nwww A 192.0.2.1\n",
        &name("example.com"),
        Path::new(FILE),
    )
    .unwrap();
    assert_eq!(recs[0].record.name, name("www.example.com."));
    assert!(recs[0].record.name.is_fqdn());
}

#[test]
fn records_keep_source_order() {
    let records = parse("$TTL 1\nz A 192.0.2.1\na A 192.0.2.2\nm A 192.0.2.3\n");
    let names: Vec<String> = records.iter().map(|r| r.record.name.to_ascii()).collect();
    assert_eq!(
        names,
        ["z.example.com.", "a.example.com.", "m.example.com."]
    );
}

#[test]
fn crlf_line_endings_and_missing_final_newline() {
    let records = parse("$TTL 1\r\na A 192.0.2.1\r\n\tA 192.0.2.2");
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].record.name, name("a.example.com."));
    assert_eq!(records[1].line, 3);
}

// --- TTLs ---------------------------------------------------------------

#[test]
fn ttl_units() {
    assert_eq!(parse_duration(b"3600"), Some(3600));
    assert_eq!(parse_duration(b"1h30m"), Some(5400));
    assert_eq!(parse_duration(b"1d"), Some(86_400));
    assert_eq!(parse_duration(b"1w"), Some(604_800));
    assert_eq!(
        parse_duration(b"2W3D4H5M6S"),
        Some(2 * 604_800 + 3 * 86_400 + 4 * 3600 + 306)
    );
    assert_eq!(parse_duration(b"0"), Some(0));
    assert_eq!(parse_duration(b"1h30"), None);
    assert_eq!(parse_duration(b"h"), None);
    assert_eq!(parse_duration(b"1x"), None);
    assert_eq!(parse_duration(b"4294967296"), None);
    assert_eq!(parse_duration(b"10000w"), None);

    let records = parse("$TTL 1h30m\na A 192.0.2.1\nb 1d A 192.0.2.2\nc 1W IN A 192.0.2.3\n");
    let ttls: Vec<u32> = records.iter().map(|r| r.record.ttl).collect();
    assert_eq!(ttls, [5400, 86_400, 604_800]);
}

#[test]
fn bad_ttls() {
    assert_eq!(error("$TTL 1x\n"), "zones/x.zone:1: bad TTL \"1x\"");
    assert_eq!(
        error("a 12q A 192.0.2.1\n"),
        "zones/x.zone:1: bad TTL \"12q\""
    );
    assert_eq!(
        error("a 2147483648 A 192.0.2.1\n"),
        "zones/x.zone:1: TTL \"2147483648\" is larger than 2147483647"
    );
    assert_eq!(
        error("a 1 2 A 192.0.2.1\n"),
        "zones/x.zone:1: unexpected \"2\": the TTL was already given"
    );
    assert_eq!(
        error("$TTL\n"),
        "zones/x.zone:1: missing argument after $TTL"
    );
    assert_eq!(
        error("$TTL 1 2\n"),
        "zones/x.zone:1: unexpected \"2\" after $TTL"
    );
}

#[test]
fn default_ttl_rules() {
    // Last explicit TTL carries over when there is no $TTL.
    let records = parse("a 120 A 192.0.2.1\nb A 192.0.2.2\n");
    assert_eq!(records[1].record.ttl, 120);

    // $TTL wins over the last explicit TTL.
    let records = parse("$TTL 60\na 120 A 192.0.2.1\nb A 192.0.2.2\n");
    assert_eq!(records[1].record.ttl, 60);

    // Without either, the SOA MINIMUM applies, to the SOA itself too.
    let records = parse("@ SOA ns hm 1 2 3 4 900\nb A 192.0.2.2\n");
    assert_eq!(records[0].record.ttl, 900);
    assert_eq!(records[1].record.ttl, 900);

    // An explicit TTL after the SOA becomes the default.
    let records = parse("@ SOA ns hm 1 2 3 4 900\nb 30 A 192.0.2.2\nc A 192.0.2.3\n");
    assert_eq!(records[2].record.ttl, 30);

    assert_eq!(
        error("\n\nwww A 192.0.2.1\n"),
        "zones/x.zone:3: no TTL specified (give one, or set $TTL before this record)"
    );
}

// --- SOA, parentheses, comments --------------------------------------

#[test]
fn parenthesised_soa_across_lines_with_comments() {
    let text = "$TTL 1h\n\
                @ IN SOA ns1 hostmaster.example.com. ( ; start\n\
                \t2024010101 ; serial\n\
                \t1h         ; refresh\n\
                \t15m        ; retry\n\
                \t1w         ; expire\n\
                \t300 )      ; minimum\n\
                www A 192.0.2.1 ; trailing comment\n";
    let records = parse(text);
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].line, 2);
    assert_eq!(records[1].line, 8);
    let RData::SOA(soa) = &records[0].record.data else {
        panic!("{records:?}")
    };
    assert_eq!(soa.mname, name("ns1.example.com."));
    assert_eq!(soa.rname, name("hostmaster.example.com."));
    assert_eq!(
        (soa.serial, soa.refresh, soa.retry, soa.expire, soa.minimum),
        (2024010101, 3600, 900, 604_800, 300)
    );
    assert_eq!(records[0].record.ttl, 3600);
}

#[test]
fn soa_timer_above_i32_keeps_its_wire_bits() {
    let rec = only("@ 1 SOA ns hm 4294967295 4294967295 1 1 1\n");
    let RData::SOA(soa) = &rec.data else {
        panic!("{rec:?}")
    };
    assert_eq!(soa.serial, u32::MAX);
    let bytes = wire(&rec.data);
    let timers = &bytes[bytes.len() - 16..bytes.len() - 8];
    assert_eq!(timers, [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1]);
}

#[test]
fn soa_errors() {
    assert_eq!(
        error("@ 1 SOA ns hm 1h 2 3 4 5\n"),
        "zones/x.zone:1: bad serial \"1h\" in SOA record"
    );
    assert_eq!(
        error("@ 1 SOA ns hm (\n 1 2 3\n 4 )\n"),
        "zones/x.zone:3: missing minimum in SOA record"
    );
    assert_eq!(
        error("@ 1 SOA ns hm 1 2 3 4x 5\n"),
        "zones/x.zone:1: bad expire \"4x\" in SOA record"
    );
}

#[test]
fn comments_and_semicolons_in_quotes() {
    let rec = only("a 1 TXT \"x; not a comment\" ; real comment \"ignored\n");
    let RData::TXT(txt) = &rec.data else {
        panic!("{rec:?}")
    };
    assert_eq!(
        &*txt.txt_data,
        [b"x; not a comment".to_vec().into_boxed_slice()]
    );
}

#[test]
fn parentheses_in_the_middle_of_a_record() {
    let records = parse("$TTL 1\na MX ( 10\n mail ) \nb A 192.0.2.1\n");
    assert_eq!(
        records[0].record.data,
        RData::MX(MX::new(10, name("mail.example.com.")))
    );
    assert_eq!(records[1].line, 4);
}

#[test]
fn unbalanced_parentheses() {
    assert_eq!(
        error("$TTL 1\n\na A 192.0.2.1 )\n"),
        "zones/x.zone:3: unbalanced parenthesis: \")\" without \"(\""
    );
    assert_eq!(
        error("$TTL 1\n@ SOA ns hm ( 1 2 3\n 4 5\nb A 192.0.2.1\n"),
        "zones/x.zone:2: unbalanced parenthesis: \"(\" is never closed"
    );
}

// --- escapes ----------------------------------------------------------

#[test]
fn escapes_in_names_build_raw_labels() {
    let rec = only("$TTL 1\na\\.b.c\\032d.\\065\\\\ A 192.0.2.1\n");
    assert_eq!(
        labels(&rec.name),
        [
            b"a.b".to_vec(),
            b"c d".to_vec(),
            b"A\\".to_vec(),
            b"example".to_vec(),
            b"com".to_vec()
        ]
    );
    // \DDD above 127 is kept as the raw byte.
    let rec = only("$TTL 1\n\\255x.example. A 192.0.2.1\n");
    assert_eq!(labels(&rec.name)[0], [255u8, b'x']);
    // An escaped dot at the end does not make the name absolute.
    let rec = only("$TTL 1\nend\\. A 192.0.2.1\n");
    assert_eq!(labels(&rec.name)[0], b"end.");
    assert_eq!(rec.name.num_labels(), 3);
}

#[test]
fn escapes_in_rdata_names() {
    let rec = only("$TTL 1\n@ SOA ns john\\.doe.example.com. 1 2 3 4 5\n");
    let RData::SOA(soa) = &rec.data else {
        panic!("{rec:?}")
    };
    assert_eq!(labels(&soa.rname)[0], b"john.doe");
    assert_eq!(soa.rname.num_labels(), 3);
}

#[test]
fn escaped_special_characters_in_bare_words() {
    let rec = only("$TTL 1\na TXT semi\\;colon paren\\( quote\\\" space\\ x\n");
    let RData::TXT(txt) = &rec.data else {
        panic!("{rec:?}")
    };
    let strings: Vec<&[u8]> = txt.txt_data.iter().map(|s| &**s).collect();
    assert_eq!(
        strings,
        [&b"semi;colon"[..], b"paren(", b"quote\"", b"space x"]
    );
}

#[test]
fn bad_escapes() {
    assert_eq!(
        error("$TTL 1\na TXT \"\\25x\"\n"),
        "zones/x.zone:2: bad escape in \"\\25x\""
    );
    assert_eq!(
        error("$TTL 1\na\\300 A 192.0.2.1\n"),
        "zones/x.zone:2: bad escape in \"a\\300\""
    );
    assert_eq!(
        error("$TTL 1\na TXT foo\\\n"),
        "zones/x.zone:2: backslash at end of line in \"foo\\\""
    );
}

#[test]
fn name_errors() {
    let long_label = "a".repeat(64);
    assert_eq!(
        error(&format!("$TTL 1\n{long_label} A 192.0.2.1\n")),
        format!(
            "zones/x.zone:2: label \"{long_label}\" is longer than 63 bytes in name \"{long_label}\""
        )
    );
    // 63 is fine, and \DDD counts as one byte.
    let ok = format!("{}\\097", "a".repeat(62));
    assert_eq!(
        only(&format!("$TTL 1\n{ok} A 192.0.2.1\n"))
            .name
            .iter()
            .next()
            .unwrap()
            .len(),
        63
    );

    // 4 labels of 63 = 256 bytes of wire form with the root: too long.
    let long_name = vec!["a".repeat(63); 4].join(".") + ".";
    let msg = error(&format!("$TTL 1\n{long_name} A 192.0.2.1\n"));
    assert!(msg.starts_with("zones/x.zone:2: name \"aaa"), "{msg}");
    assert!(msg.ends_with("is longer than 255 bytes"), "{msg}");
    // Too long only once the origin (12 more bytes) is appended.
    let relative = vec!["a".repeat(63); 3].join(".") + "." + &"a".repeat(52);
    let msg = error(&format!("$TTL 1\n{relative} A 192.0.2.1\n"));
    assert!(msg.contains("is longer than 255 bytes"), "{msg}");
    // 255 exactly is fine.
    let max = vec!["a".repeat(63); 3].join(".") + "." + &"b".repeat(61) + ".";
    assert_eq!(
        only(&format!("$TTL 1\n{max} A 192.0.2.1\n")).name.len(),
        254
    );

    assert_eq!(
        error("$TTL 1\na..b A 192.0.2.1\n"),
        "zones/x.zone:2: empty label in name \"a..b\""
    );
    assert_eq!(
        error("$TTL 1\nwww CNAME .foo\n"),
        "zones/x.zone:2: empty label in name \".foo\""
    );
    assert_eq!(
        error("$TTL 1\n\"\" A 192.0.2.1\n"),
        "zones/x.zone:2: empty name"
    );
}

// --- TXT ----------------------------------------------------------------

#[test]
fn txt_multiple_strings_and_escaped_quotes() {
    let rec = only(
        "$TTL 1\na TXT \"v=spf1 -all\" bare \"say \\\"hi\\\"\" \"\" \"\\065\\\\\" (\n \"next line\" )\n",
    );
    let RData::TXT(txt) = &rec.data else {
        panic!("{rec:?}")
    };
    let strings: Vec<&[u8]> = txt.txt_data.iter().map(|s| &**s).collect();
    assert_eq!(
        strings,
        [
            &b"v=spf1 -all"[..],
            b"bare",
            b"say \"hi\"",
            b"",
            b"A\\",
            b"next line"
        ]
    );
}

#[test]
fn txt_length_limits() {
    let ok = "x".repeat(255);
    let rec = only(&format!("$TTL 1\na TXT \"{ok}\"\n"));
    assert_eq!(wire(&rec.data).len(), 256);
    let long = "x".repeat(256);
    let msg = error(&format!("$TTL 1\na TXT ok \"{long}\"\n"));
    assert!(
        msg.starts_with("zones/x.zone:2: TXT string \"xxxx"),
        "{msg}"
    );
    assert!(
        msg.ends_with("is longer than 255 bytes (256 bytes)"),
        "{msg}"
    );
    // Escapes count as the byte they stand for.
    let escaped = "\\120".repeat(255);
    let rec = only(&format!("$TTL 1\na TXT {escaped}\n"));
    assert_eq!(wire(&rec.data).len(), 256);
    assert_eq!(
        error("$TTL 1\na TXT\n"),
        "zones/x.zone:2: missing text in TXT record"
    );
}

#[test]
fn unterminated_quoted_string() {
    assert_eq!(
        error("$TTL 1\na TXT \"abc\nb A 192.0.2.1\n"),
        "zones/x.zone:2: unterminated quoted string"
    );
    assert_eq!(
        error("$TTL 1\na TXT \"abc\\\""),
        "zones/x.zone:2: unterminated quoted string"
    );
}

// --- CAA ----------------------------------------------------------------

#[test]
fn caa_round_trips_exact_bytes() {
    let records = parse(
        "$TTL 1\n\
         @ CAA 0 issue \"ca.example.net; account=230123\"\n\
         @ CAA 128 tbs \"Unknown\"\n\
         @ CAA 0 iodef mailto:security@example.com\n\
         @ CAA 0 issue \";\"\n\
         @ CAA 1 Issue \"%%%odd \\255 value\"\n\
         @ CAA 0 issuewild \"\"\n",
    );
    let expect = |flags: u8, tag: &str, value: &[u8]| {
        let mut v = vec![flags, tag.len() as u8];
        v.extend_from_slice(tag.as_bytes());
        v.extend_from_slice(value);
        v
    };
    let wires: Vec<Vec<u8>> = records.iter().map(|r| wire(&r.record.data)).collect();
    assert_eq!(
        wires,
        [
            expect(0, "issue", b"ca.example.net; account=230123"),
            expect(128, "tbs", b"Unknown"),
            expect(0, "iodef", b"mailto:security@example.com"),
            expect(0, "issue", b";"),
            expect(1, "Issue", b"%%%odd \xff value"),
            expect(0, "issuewild", b""),
        ]
    );
    // And hickory's decoder reads back the same record.
    for r in &records {
        let bytes = wire(&r.record.data);
        let back = rdata_from_wire(RecordType::CAA, bytes).unwrap();
        assert_eq!(back, r.record.data);
    }
}

#[test]
fn caa_errors() {
    assert_eq!(
        error("$TTL 1\n@ CAA 0 is-sue \"x\"\n"),
        "zones/x.zone:2: bad CAA tag \"is-sue\" (must be 1-15 ASCII letters or digits)"
    );
    assert_eq!(
        error("$TTL 1\n@ CAA 0 abcdefghijklmnop \"x\"\n"),
        "zones/x.zone:2: bad CAA tag \"abcdefghijklmnop\" (must be 1-15 ASCII letters or digits)"
    );
    assert_eq!(
        error("$TTL 1\n@ CAA 256 issue \"x\"\n"),
        "zones/x.zone:2: bad flags \"256\" in CAA record"
    );
    assert_eq!(
        error("$TTL 1\n@ CAA 0 issue\n"),
        "zones/x.zone:2: missing value in CAA record"
    );
    assert_eq!(
        error("$TTL 1\n@ CAA 0 issue a b\n"),
        "zones/x.zone:2: unexpected \"b\" after CAA record data"
    );
}

// --- RFC 3597 -----------------------------------------------------------

#[test]
fn generic_unknown_type() {
    let records = parse(
        "$TTL 1\n\
         a TYPE65280 \\# 4 0A000001\n\
         b type731 \\# 6 ( 0a 00\n  00 01 ; comment\n FFff )\n\
         c TYPE65281 \\# 0\n",
    );
    assert_eq!(
        records[0].record.data,
        RData::Unknown {
            code: RecordType::Unknown(65280),
            rdata: NULL::with(vec![10, 0, 0, 1]),
        }
    );
    assert_eq!(records[0].record.record_type(), RecordType::Unknown(65280));
    assert_eq!(
        records[1].record.data,
        RData::Unknown {
            code: RecordType::Unknown(731),
            rdata: NULL::with(vec![10, 0, 0, 1, 255, 255]),
        }
    );
    assert_eq!(records[2].line, 6);
    assert_eq!(
        records[2].record.data,
        RData::Unknown {
            code: RecordType::Unknown(65281),
            rdata: NULL::new(),
        }
    );
}

#[test]
fn generic_form_of_known_types_is_decoded() {
    let records = parse(
        "$TTL 1\n\
         a A \\# 4 0A000001\n\
         b TYPE1 10.0.0.2\n\
         c MX \\# 8 000a 04 6d61696c 00\n\
         d TXT \\# 7 0268690361 6263\n\
         e TYPE15 20 mx\n\
         f CAA \\# 11 00 05 6973737565 6361 2e6e\n",
    );
    let data: Vec<RData> = records.iter().map(|r| r.record.data.clone()).collect();
    assert_eq!(
        data,
        [
            RData::A(A::new(10, 0, 0, 1)),
            RData::A(A::new(10, 0, 0, 2)),
            RData::MX(MX::new(10, name("mail."))),
            RData::TXT(TXT::new(vec!["hi".into(), "abc".into()])),
            RData::MX(MX::new(20, name("mx.example.com."))),
            parse("$TTL 1\n@ CAA 0 issue ca.n\n")[0].record.data.clone(),
        ]
    );
}

#[test]
fn quoted_backslash_hash_is_text_not_generic_form() {
    let rec = only("$TTL 1\na TXT \"\\#\" 1 00\n");
    assert_eq!(
        rec.data,
        RData::TXT(TXT::new(vec!["#".into(), "1".into(), "00".into()]))
    );
}

#[test]
fn generic_errors() {
    assert_eq!(
        error("$TTL 1\na TYPE65280 \\# 4 0A0000\n"),
        "zones/x.zone:2: RFC 3597 data length 4 does not match the 3 bytes given"
    );
    assert_eq!(
        error("$TTL 1\na TYPE65280 \\# 2 0A0\n"),
        "zones/x.zone:2: odd number of hex digits in RFC 3597 data"
    );
    assert_eq!(
        error("$TTL 1\na TYPE65280 \\# 2 0A (\n 0g )\n"),
        "zones/x.zone:3: bad RFC 3597 hex data \"0g\" in TYPE65280 record"
    );
    assert_eq!(
        error("$TTL 1\na TYPE65280 \\# x 00\n"),
        "zones/x.zone:2: bad RFC 3597 data length \"x\" in TYPE65280 record"
    );
    assert_eq!(
        error("$TTL 1\na TYPE65280 \\#\n"),
        "zones/x.zone:2: missing RFC 3597 data length in TYPE65280 record"
    );
    assert_eq!(
        error("$TTL 1\na TYPE65280 \\# 70000\n"),
        "zones/x.zone:2: bad RFC 3597 data length \"70000\" in TYPE65280 record"
    );
    let msg = error("$TTL 1\na A \\# 3 0A0000\n");
    assert!(
        msg.starts_with("zones/x.zone:2: RFC 3597 data for A record does not decode: "),
        "{msg}"
    );
    let msg = error("$TTL 1\na A \\# 5 0A00000102\n");
    assert!(
        msg.starts_with("zones/x.zone:2: RFC 3597 data for A record does not decode: "),
        "{msg}"
    );
    // A CAA tag hickory cannot decode.
    let msg = error("$TTL 1\na CAA \\# 4 00 01 2d 78\n");
    assert!(msg.contains("CAA record does not decode"), "{msg}");
    // SOA whose rname is a compression pointer to the mname.
    assert_eq!(
        error("$TTL 1\n@ SOA \\# 26 026e7300 c000 00000001 00000002 00000003 00000004 00000005\n"),
        "zones/x.zone:2: RFC 3597 data for SOA record does not re-encode to the same bytes \
         (compressed names are not allowed)"
    );
}

// --- types, classes, general errors ----------------------------------

#[test]
fn bad_addresses() {
    assert_eq!(
        error("$TTL 1\n\n\n\n\n\nwww A 300.1.1.1\n"),
        "zones/x.zone:7: bad IPv4 address \"300.1.1.1\" in A record"
    );
    assert_eq!(
        error("$TTL 1\nwww AAAA 2001:db8::g\n"),
        "zones/x.zone:2: bad IPv6 address \"2001:db8::g\" in AAAA record"
    );
    assert_eq!(
        error("$TTL 1\nwww A\n"),
        "zones/x.zone:2: missing IPv4 address in A record"
    );
    assert_eq!(
        error("$TTL 1\nwww A 192.0.2.1 192.0.2.2\n"),
        "zones/x.zone:2: unexpected \"192.0.2.2\" after A record data"
    );
}

#[test]
fn bad_numbers() {
    assert_eq!(
        error("$TTL 1\n@ MX 65536 mail\n"),
        "zones/x.zone:2: bad preference \"65536\" in MX record"
    );
    assert_eq!(
        error("$TTL 1\n@ MX -1 mail\n"),
        "zones/x.zone:2: bad preference \"-1\" in MX record"
    );
    assert_eq!(
        error("$TTL 1\n_s._tcp SRV 1 2 http x\n"),
        "zones/x.zone:2: bad port \"http\" in SRV record"
    );
    assert_eq!(
        error("$TTL 1\n_s._tcp SRV 1 2 80\n"),
        "zones/x.zone:2: missing target name in SRV record"
    );
}

#[test]
fn type_errors() {
    assert_eq!(
        error("$TTL 1\nwww AA 192.0.2.1\n"),
        "zones/x.zone:2: unknown record type \"AA\""
    );
    assert_eq!(
        error("$TTL 1\nwww TYPE70000 \\# 0\n"),
        "zones/x.zone:2: unknown record type \"TYPE70000\""
    );
    assert_eq!(
        error("$TTL 1\nwww 60 IN\n"),
        "zones/x.zone:2: missing record type"
    );
    assert_eq!(
        error("$TTL 1\nwww TYPE41 \\# 0\n"),
        "zones/x.zone:2: record type \"TYPE41\" cannot appear in a zone file"
    );
    assert_eq!(
        error("$TTL 1\nwww AXFR \\# 0\n"),
        "zones/x.zone:2: record type \"AXFR\" cannot appear in a zone file"
    );
    assert_eq!(
        error("$TTL 1\nwww TYPE0 \\# 0\n"),
        "zones/x.zone:2: record type \"TYPE0\" cannot appear in a zone file"
    );
    assert_eq!(
        error("$TTL 1\nwww TYPE65000 \"pc\" \"os\"\n"),
        "zones/x.zone:2: record type TYPE65000 is only supported in RFC 3597 form (\\# <length> <hex>)"
    );
    // ... and the RFC 3597 form of it works.
    let rec = only("$TTL 1\nwww HINFO \\# 6 02706302 6f73\n");
    assert_eq!(rec.record_type(), RecordType::HINFO);
}

#[test]
fn class_errors() {
    assert_eq!(
        error("$TTL 1\nwww CH A 192.0.2.1\n"),
        "zones/x.zone:2: unsupported class \"CH\" (only IN is supported)"
    );
    assert_eq!(
        error("$TTL 1\nwww 60 CLASS3 A 192.0.2.1\n"),
        "zones/x.zone:2: unsupported class \"CLASS3\" (only IN is supported)"
    );
    assert_eq!(
        error("$TTL 1\nwww IN IN A 192.0.2.1\n"),
        "zones/x.zone:2: the class is given twice"
    );
}

#[test]
fn unknown_directive() {
    assert_eq!(
        error("$GENERATOR 1-10 a$ A 192.0.2.$\n"),
        "zones/x.zone:1: unknown directive \"$GENERATOR\""
    );
    assert_eq!(
        error("$ORIGIN\n"),
        "zones/x.zone:1: missing argument after $ORIGIN"
    );
}

/// The parser reads `$INCLUDE`d files through its [`SourceFiles`] only:
/// here a map in memory, with each file's stamp kept in order.
#[test]
fn includes_are_read_through_the_source_files() {
    struct Memory(Vec<(&'static str, &'static str)>);
    impl SourceFiles for Memory {
        fn read(&mut self, path: &Path) -> io::Result<(String, SourceFile)> {
            let (_, text) = self
                .0
                .iter()
                .find(|(p, _)| Path::new(p) == path)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            let stamp = SourceFile {
                path: path.to_path_buf(),
                len: text.len() as u64,
                modified_s: 0,
                modified_ns: 0,
            };
            Ok((text.to_string(), stamp))
        }
    }
    let mut files = Memory(vec![
        (
            "/z/main.zone",
            "$TTL 60\nwww A 192.0.2.1\n$INCLUDE sub/inc.zone\n",
        ),
        ("/z/sub/inc.zone", "inc A 192.0.2.2\n"),
    ]);
    let mut records = Vec::new();
    let stamp = parse_zone_source(&mut files, Path::new("/z/main.zone"), &origin(), &mut |b| {
        records.extend(b)
    })
    .unwrap();
    let owners: Vec<String> = records.iter().map(|r| r.record.name.to_ascii()).collect();
    assert_eq!(owners, ["www.example.com.", "inc.example.com."]);
    let stamped: Vec<&Path> = stamp.files.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(
        stamped,
        [Path::new("/z/main.zone"), Path::new("/z/sub/inc.zone")]
    );
    // Text in memory has no files: an `$INCLUDE` is an error naming the line.
    let err = parse_zone_str("$INCLUDE x.zone\n", &origin(), Path::new(FILE)).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("zones/x.zone:1: cannot read included file"),
        "{err}"
    );
}

#[test]
fn generate_makes_one_record_per_value() {
    let records = parse("$TTL 60\n$GENERATE 1-3/2 host-${0,2} A 192.0.2.$\n");
    let got: Vec<String> = records
        .iter()
        .map(|r| format!("{} {}", r.record.name, r.record.data))
        .collect();
    assert_eq!(
        got,
        [
            "host-01.example.com. 192.0.2.1",
            "host-03.example.com. 192.0.2.3"
        ]
    );
    assert_eq!(records[1].line, 2, "the directive's line");
    // The last value of the range ends it (no wrap-around).
    let last =
        parse("$TTL 60\n$GENERATE 18446744073709551615-18446744073709551615 h$ A 192.0.2.1\n");
    assert_eq!(last.len(), 1);
    assert_eq!(
        error("$TTL 1\n$GENERATE 5-1 h$ A 192.0.2.$\n"),
        "zones/x.zone:2: bad $GENERATE range \"5-1\""
    );
    assert_eq!(
        error("$TTL 1\n$GENERATE 1-300 h$ A 192.0.2.$\n"),
        "zones/x.zone:2: bad IPv4 address \"192.0.2.256\" in A record"
    );
}

#[test]
fn dnssec_and_other_types_in_presentation_form() {
    // RFC 4034 §2.3, §3.3, §4.3, §5.3 examples (DS digest from §5.4).
    let dnskey = only(
        "$TTL 86400\n@ DNSKEY 256 3 5 ( AQPSKmynfzW4kyBv015MUG2DeIQ3\n\
         Cbl+BBZH4b/0PY1kxkmvHjcZc8no\nkfzj31GajIQKY+5CptLr3buXA10h\n\
         WqTkF7H6RfoRqXQeogmMHfpftf6z\nMv1LyBUgia7za6ZEzOJBOztyvhjL\n\
         742iU/TpPSEDhm2SNKLijfUppn1U\naNvv4w==  )\n",
    );
    assert_eq!(dnskey.record_type(), RecordType::DNSKEY);
    let w = wire(&dnskey.data);
    assert_eq!(&w[..4], &[1, 0, 3, 5], "flags 256, protocol 3, algorithm 5");
    let rrsig = only(
        "$TTL 3600\nhost RRSIG A 5 3 86400 20030322173103 ( 20030220173103 2642 example.com.\n\
         oJB1W6WNGv+ldvQ3WDG0MQkg5IEhjRip8WTrPYGv07h108dUKGMeDPKijVCH\n\
         X3DDKdfb+v6oB9wfuh3DTJXUAfI/M0zmO/zz8bW0Rznl8O3tGNazPwQKkRN2\n\
         0XPXV6nwwfoXmJQbsLNrLfkGJ5D6fwFm8nN+6pBzeDQfsS3Ap3o= )\n",
    );
    let w = wire(&rrsig.data);
    assert_eq!(&w[..4], &[0, 1, 5, 3], "covers A, algorithm 5, 3 labels");
    assert_eq!(&w[4..8], &86400u32.to_be_bytes());
    assert_eq!(
        &w[8..12],
        &1_048_354_263u32.to_be_bytes(),
        "2003-03-22 17:31:03"
    );
    assert_eq!(&w[16..18], &2642u16.to_be_bytes());
    let nsec = only("$TTL 3600\nalfa NSEC host.example.com. ( A MX RRSIG NSEC TYPE1234 )\n");
    let mut expected = vec![4, b'h', b'o', b's', b't', 7];
    expected.extend_from_slice(b"example\x03com\x00");
    expected.extend_from_slice(&[0, 6, 0x40, 1, 0, 0, 0, 3, 4, 0x1b]);
    expected.extend([0; 26]);
    expected.push(0x20);
    assert_eq!(wire(&nsec.data), expected);
    let ds = only("$TTL 3600\ndskey DS 60485 5 1 ( 2BB183AF5F22588179A53B0A\n98631FAD1A292118 )\n");
    assert_eq!(
        wire(&ds.data),
        [
            0xec, 0x45, 5, 1, 0x2b, 0xb1, 0x83, 0xaf, 0x5f, 0x22, 0x58, 0x81, 0x79, 0xa5, 0x3b,
            0x0a, 0x98, 0x63, 0x1f, 0xad, 0x1a, 0x29, 0x21, 0x18
        ]
    );
    // RFC 5155 Appendix A.
    let nsec3 = only(
        "$TTL 3600\n0p9mhaveqvm6t7vbl5lop2u3t2rp3tom NSEC3 1 1 12 aabbccdd (\n\
         2t7b4g4vsa5smi47k61mv5bv1a22bojr MX DNSKEY NS SOA NSEC3PARAM RRSIG )\n",
    );
    let w = wire(&nsec3.data);
    assert_eq!(&w[..9], &[1, 1, 0, 12, 4, 0xaa, 0xbb, 0xcc, 0xdd]);
    assert_eq!(w[9], 20, "hash length");
    let param = only("$TTL 3600\n@ NSEC3PARAM 1 0 12 -\n");
    assert_eq!(wire(&param.data), [1, 0, 0, 12, 0]);
    // RFC 1876's example location; URI (RFC 7553); RP; DNAME.
    let loc = only("$TTL 1\n@ LOC 42 21 54 N 71 06 18 W -24m 30m\n");
    assert_eq!(
        wire(&loc.data),
        [
            0, 0x33, 0x16, 0x13, 0x89, 0x17, 0x2d, 0xd0, 0x70, 0xbe, 0x15, 0xf0, 0x00, 0x98, 0x8d,
            0x20
        ]
    );
    for bad in [
        "90 30 0 N 0 E 0m",
        "0 N 180 1 W 0m",
        "0 N 0 E 1e300m",
        "0 N 0 E 0 NaN",
    ] {
        assert!(
            error(&format!("$TTL 1\n@ LOC {bad}\n")).starts_with("zones/x.zone:2: bad "),
            "{bad}"
        );
    }
    let uri = only("$TTL 1\n_ftp._tcp URI 10 1 \"ftp://ftp1.example.com/public\"\n");
    let w = wire(&uri.data);
    assert_eq!(&w[..4], &[0, 10, 0, 1]);
    assert_eq!(&w[4..], b"ftp://ftp1.example.com/public");
    let rp = only("$TTL 1\n@ RP admin txt\n");
    assert_eq!(rp.record_type(), RecordType::Unknown(17));
    let dname = only("$TTL 1\nold DNAME new\n");
    assert_eq!(dname.record_type(), RecordType::DNAME);
    assert_eq!(wire(&dname.data), b"\x03new\x07example\x03com\x00".to_vec());
    let https = only("$TTL 1\nwww HTTPS 1 . alpn=\"h2,h3\" port=443\n");
    assert_eq!(https.record_type(), RecordType::HTTPS);
    let w = wire(&https.data);
    assert!(
        w.windows(8).any(|x| x == b"\x00\x06\x02h2\x02h3"),
        "alpn holds both: {w:?}"
    );
    // Errors still name the line and the field.
    assert_eq!(
        error("$TTL 1\n@ DS 1 8 2 zz\n"),
        "zones/x.zone:2: bad hex data in DS record"
    );
    assert_eq!(
        error("$TTL 1\n@ RRSIG A 13 2 60 20261301000000 20261101000000 1 example.com. AAAA\n"),
        "zones/x.zone:2: bad signature time \"20261301000000\" in RRSIG record"
    );
}
