//! The socket protocols' tests: what travels, what never shows, and how a line is sorted.

use super::*;

#[test]
fn a_session_start_cannot_carry_an_agent() {
    // A relay that names an agent is not heard: the field does not exist, so it is dropped.
    let line =
        r#"{"kind":"session.start","session_id":"s","connector":"c","client":"a","agent":"a"}"#;
    let req: SessionRequest = serde_json::from_str(line).unwrap();
    let back = serde_json::to_string(&req).unwrap();
    assert!(!back.contains("agent"), "{back}");
}

#[test]
fn a_launch_travels_whole_but_no_debug_of_a_message_shows_its_secret() {
    let launch = crate::connector::Launch {
        command: vec!["/usr/bin/node".into()],
        env_key: "K".into(),
        secret: crate::vault::Secret::new("canary-7f3a".into()),
        pass_env: vec![],
        cwd: "/".into(),
        pinned_env: vec![],
    };
    let r = SessionResponse::SessionOpened {
        launch: Some(launch),
    };
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.starts_with("{\"kind\":\"session.opened\""));
    assert!(
        text.contains("canary-7f3a"),
        "the secret travels to the relay"
    );
    assert!(!format!("{r:?}").contains("canary"));
    let back: SessionResponse = serde_json::from_str(&text).unwrap();
    assert!(!format!("{back:#?}").contains("canary"));
    let set = ManageRequest::ConnectorSet(crate::connector::SetRequest {
        name: "gh".into(),
        env_key: "K".into(),
        command: vec!["/usr/bin/node".into()],
        pass_env: vec![],
        secret: crate::vault::Secret::new("canary-7f3a".into()),
        cwd: "/".into(),
        pinned_env: vec![],
    });
    let text = serde_json::to_string(&set).unwrap();
    assert!(
        text.starts_with("{\"kind\":\"connector.set\""),
        "{}",
        text.len()
    );
    let back = Incoming::read(text.as_bytes()).unwrap();
    assert!(matches!(
        back,
        Incoming::Manage(ManageRequest::ConnectorSet(_))
    ));
    assert!(!format!("{set:?}{back:?}").contains("canary"));
}

#[test]
fn requests_round_trip_through_json() {
    let r = SessionRequest::CallRequest {
        session_id: "s".into(),
        seq: 1,
        tool: "t".into(),
        args_digest: "d".into(),
        arguments: Some("{\"a\":1}".into()),
        arguments_omitted: false,
        retry_of: None,
    };
    let text = serde_json::to_string(&r).unwrap();
    assert!(text.starts_with("{\"kind\":\"call.request\""));
    let back = Incoming::read(text.as_bytes()).unwrap();
    assert!(matches!(
        back,
        Incoming::Session(SessionRequest::CallRequest { .. })
    ));
}

/// One enum of every kind, named as the socket's one request enum was before its two protocols
/// were separate types (the name is part of serde's words).
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "kind")]
#[allow(dead_code)]
enum Request {
    #[serde(rename = "session.start")]
    K0,
    #[serde(rename = "call.request")]
    K1,
    #[serde(rename = "call.outcome")]
    K2,
    #[serde(rename = "anomaly")]
    K3,
    #[serde(rename = "tools.listed")]
    K3b,
    #[serde(rename = "session.end")]
    K4,
    #[serde(rename = "policy.set")]
    K5,
    #[serde(rename = "policy.remove")]
    K6,
    #[serde(rename = "policy.list")]
    K7,
    #[serde(rename = "budget.set")]
    K8,
    #[serde(rename = "budget.remove")]
    K9,
    #[serde(rename = "policy.explain")]
    K10,
    #[serde(rename = "policy.import")]
    K11,
    #[serde(rename = "policy.export")]
    K12,
    #[serde(rename = "daemon.status")]
    K13,
    #[serde(rename = "daemon.shutdown")]
    K14,
    #[serde(rename = "approval.list")]
    K15,
    #[serde(rename = "approval.watch")]
    K16,
    #[serde(rename = "approval.decide")]
    K17,
    #[serde(rename = "agent.add")]
    K18,
    #[serde(rename = "agent.list")]
    K19,
    #[serde(rename = "agent.remove")]
    K20,
    #[serde(rename = "connector.set")]
    K21,
    #[serde(rename = "connector.remove")]
    K22,
    #[serde(rename = "connector.list")]
    K23,
    #[serde(rename = "vault.probe")]
    K24,
    #[serde(rename = "tools.accept")]
    K24b,
    #[serde(rename = "setting.set")]
    K24c,
    #[serde(rename = "daemon.hello")]
    K25,
}

#[test]
fn a_line_that_is_no_request_is_refused_in_the_words_one_enum_of_every_kind_gave() {
    for line in [
        r#"{"kind":"nope"}"#,
        r#"{"seq":1,"kind":"policy.sett","x":[1,2]}"#,
        r#"{"kind":7}"#,
        r#"{"session_id":"s"}"#,
        r#"{"kind":"anomaly","kind":"anomaly"}"#,
        r#"[1]"#,
        "[]",
        "5",
        r#""call.request""#,
        "not json",
        r#"{"kind":"call.request""#,
    ] {
        let ours = Incoming::read(line.as_bytes()).unwrap_err().to_string();
        let one = serde_json::from_str::<Request>(line)
            .unwrap_err()
            .to_string();
        assert_eq!(ours, one, "{line}");
    }
}

/// The review of issue 13 found that skipping the other fields unread while looking for `kind`
/// named `kind` where the old reading named the first fault of the line.
#[test]
fn a_line_with_a_bad_value_beside_a_missing_or_unknown_kind_is_refused_for_its_first_fault() {
    let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
    let lines: [&[u8]; 9] = [
        br#"{"x":"\ud800"}"#,
        br#"{"x":"\ud800","kind":"nope"}"#,
        br#"{"x":1e400}"#,
        deep.as_bytes(),
        b"{\"x\":\"\xff\"}",
        br#"{"kind":"daemon.status","x":"\ud800","kind":"daemon.status"}"#,
        br#"[{"x":"\ud800"}]"#,
        // A good kind: the fast read passes, and the request's own read names the fault.
        br#"{"x":"\ud800","kind":"daemon.status"}"#,
        br#"{"kind":"call.request","x":1e400}"#,
    ];
    for line in lines {
        let ours = Incoming::read(line).unwrap_err().to_string();
        let one = serde_json::from_slice::<Request>(line)
            .unwrap_err()
            .to_string();
        assert_eq!(ours, one, "{}", String::from_utf8_lossy(line));
    }
}

#[test]
fn each_protocol_and_the_hello_travel_as_they_always_did() {
    let lines = [
        (
            serde_json::to_string(&HelloRequest::Hello).unwrap(),
            r#"{"kind":"daemon.hello"}"#,
        ),
        (
            serde_json::to_string(&ManageRequest::Status).unwrap(),
            r#"{"kind":"daemon.status"}"#,
        ),
        (
            serde_json::to_string(&SessionResponse::Ok).unwrap(),
            r#"{"kind":"ok"}"#,
        ),
        (
            serde_json::to_string(&ManageResponse::Error {
                message: "m".into(),
            })
            .unwrap(),
            r#"{"kind":"error","message":"m"}"#,
        ),
    ];
    for (got, want) in lines {
        assert_eq!(got, want);
    }
    assert!(matches!(
        Incoming::read(br#"{"kind":"daemon.hello"}"#),
        Ok(Incoming::Hello(HelloRequest::Hello))
    ));
}
