use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;
use crate::holdmap::model::fixture::machine;
use crate::holdmap::plan::plan_port;

/// A clock the test moves by hand.
fn clock() -> (Clock, Arc<Mutex<Instant>>) {
    let now = Arc::new(Mutex::new(Instant::now()));
    let read = Arc::clone(&now);
    (Arc::new(move || *read.lock().unwrap()), now)
}

fn retained(port: u16) -> RetainedPreview {
    RetainedPreview {
        request: Request::Port {
            port,
            options: PlanOptions::default(),
        },
        plans: vec![plan_port(&machine(), port, None, PlanOptions::default())],
        agents: Vec::new(),
    }
}

#[test]
fn a_handle_is_sixteen_hex_digits_a_dash_and_a_counter() {
    let mut h = Handles::new();
    let a = h.issue(retained(3000)).unwrap();
    let b = h.issue(retained(3001)).unwrap();
    let (ns, n) = a.split_once('-').unwrap();
    assert_eq!(ns.len(), 16);
    assert!(
        ns.chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(n, "1");
    assert_eq!(b, format!("{ns}-2"));
}

#[test]
fn a_handle_is_used_once() {
    let mut h = Handles::new();
    let id = h.issue(retained(3000)).unwrap();
    assert_eq!(h.take(&id).unwrap(), retained(3000));
    assert_eq!(h.take(&id), Err(Why::NoSuchHandle));
}

#[test]
fn a_handle_expires_after_its_lifetime() {
    let (c, now) = clock();
    let mut h = Handles::with_clock(c);
    let early = h.issue(retained(3000)).unwrap();
    let late = h.issue(retained(3001)).unwrap();
    *now.lock().unwrap() += HOLDMAP_HANDLE_TTL - Duration::from_secs(1);
    assert!(h.take(&early).is_ok(), "usable just before 300 s");
    *now.lock().unwrap() += Duration::from_secs(1);
    assert_eq!(h.take(&late), Err(Why::NoSuchHandle), "gone at 300 s");
}

#[test]
fn a_handle_from_another_session_is_not_accepted() {
    let mut one = Handles::new();
    let mut other = Handles::new();
    let id = one.issue(retained(3000)).unwrap();
    assert_eq!(other.take(&id), Err(Why::NoSuchHandle));
    assert!(
        one.take(&id).is_ok(),
        "the failed attempt elsewhere left it"
    );
}

#[test]
fn clearing_forgets_every_handle() {
    let mut h = Handles::new();
    let id = h.issue(retained(3000)).unwrap();
    h.clear();
    assert_eq!(h.take(&id), Err(Why::NoSuchHandle));
    assert_eq!(h.len(), 0);
}

#[test]
fn the_thirty_third_preview_evicts_the_first() {
    let mut h = Handles::new();
    let ids: Vec<String> = (0..=HOLDMAP_HANDLES_MAX)
        .map(|i| h.issue(retained(3000 + u16::try_from(i).unwrap())).unwrap())
        .collect();
    assert_eq!(ids.len(), 33);
    assert_eq!(h.len(), HOLDMAP_HANDLES_MAX);
    assert_eq!(h.take(&ids[0]), Err(Why::NoSuchHandle));
    assert!(h.take(&ids[1]).is_ok());
    assert!(h.take(&ids[32]).is_ok());
}

#[test]
fn a_preview_of_more_than_128_targets_gets_no_handle() {
    let mut h = Handles::new();
    let mut r = retained(3000);
    r.plans = (0..=HOLDMAP_PREVIEW_TARGETS_MAX)
        .map(|i| {
            plan_port(
                &machine(),
                3000 + u16::try_from(i).unwrap(),
                None,
                PlanOptions::default(),
            )
        })
        .collect();
    assert_eq!(h.issue(r.clone()), Err(NoHandle::TooManyTargets(129)));
    r.plans.truncate(HOLDMAP_PREVIEW_TARGETS_MAX);
    assert!(h.issue(r).is_ok(), "exactly 128 is allowed");
    let mut agents = retained(3000);
    agents.agents = (0..=128).map(|i| (i + 2, 1)).collect();
    assert_eq!(h.issue(agents), Err(NoHandle::TooManyTargets(129)));
}

#[test]
fn a_preview_over_one_mebibyte_gets_no_handle() {
    let mut h = Handles::new();
    let mut r = retained(3000);
    r.plans[0].risk_reason = "x".repeat(HOLDMAP_PREVIEW_BYTES_MAX);
    assert_eq!(h.issue(r), Err(NoHandle::TooLarge));
    assert_eq!(h.len(), 0);
}

#[test]
fn a_preview_with_nothing_to_stop_gets_no_handle() {
    let mut h = Handles::new();
    let mut r = retained(3000);
    r.plans.clear();
    assert_eq!(h.issue(r), Err(NoHandle::Empty));
}
