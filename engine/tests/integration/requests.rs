//! `add_request` rejects requests that can never run; `abort` frees
//! everything a request holds.

use crate::common;
use common::*;
use engine::request::RequestError;

#[test]
fn rejects_empty_prompt() {
    let mut e = engine(small_config());
    assert_eq!(
        e.add_request(req(1, vec![], 4)),
        Err(RequestError::EmptyPrompt(id(1)))
    );
    assert!(!e.has_unfinished());
}

#[test]
fn rejects_zero_max_tokens() {
    let mut e = engine(small_config());
    assert_eq!(
        e.add_request(req(1, prompt(0, 4), 0)),
        Err(RequestError::NoOutput(id(1)))
    );
}

#[test]
fn rejects_prompt_plus_max_tokens_above_max_model_len() {
    let mut e = engine(small_config());
    let err = e.add_request(req(1, prompt(0, 40), 25)).unwrap_err();
    assert_eq!(
        err,
        RequestError::TooLong {
            id: id(1),
            prompt: 40,
            max_tokens: 25,
            max_model_len: 64
        }
    );
    assert!(err.to_string().contains("max_model_len"));
    assert_eq!(e.add_request(req(1, prompt(0, 40), 24)), Ok(()));
}

#[test]
fn rejects_duplicate_id_until_the_first_finishes() {
    let mut e = engine(small_config());
    e.add_request(req(1, prompt(0, 4), 1)).unwrap();
    assert_eq!(
        e.add_request(req(1, prompt(9, 4), 1)),
        Err(RequestError::DuplicateId(id(1)))
    );
    run_to_idle(&mut e, 5);
    assert_eq!(e.add_request(req(1, prompt(9, 4), 1)), Ok(()));
}

#[test]
fn abort_of_waiting_request_removes_it() {
    let mut e = engine(small_config());
    e.add_request(req(1, prompt(0, 4), 3)).unwrap();
    e.add_request(req(2, prompt(10, 4), 3)).unwrap();
    e.abort(id(1)).unwrap();
    assert_eq!(waiting(&e), vec![2]);
    let o = e.step().unwrap();
    assert_eq!(o.admitted, vec![(id(2), 0)]);
}

#[test]
fn abort_of_running_request_frees_its_blocks() {
    let mut e = engine(small_config());
    e.add_request(req(1, prompt(0, 16), 8)).unwrap();
    e.add_request(req(2, prompt(0, 18), 8)).unwrap();
    e.step().unwrap();
    let shared = e.block_table(id(1)).unwrap().to_vec();
    let own: Vec<u32> = e.block_table(id(2)).unwrap()[4..].to_vec();
    assert!(shared.iter().all(|&b| e.kv_cache().ref_count(b) == 2));
    e.abort(id(2)).unwrap();
    assert_eq!(running(&e), vec![1]);
    assert!(
        shared.iter().all(|&b| e.kv_cache().ref_count(b) == 1),
        "request 1 keeps its references"
    );
    assert!(own.iter().all(|&b| e.kv_cache().ref_count(b) == 0));
    assert_eq!(e.kv_cache().num_used_blocks(), 4);
    assert_eq!(e.block_table(id(2)), None);
    e.abort(id(1)).unwrap();
    assert_eq!(e.kv_cache().num_used_blocks(), 0);
    assert!(!e.has_unfinished());
}

#[test]
fn abort_of_unknown_or_finished_request_is_an_error() {
    let mut e = engine(small_config());
    assert_eq!(e.abort(id(7)), Err(RequestError::Unknown(id(7))));
    e.add_request(req(7, prompt(0, 4), 1)).unwrap();
    run_to_idle(&mut e, 5);
    assert_eq!(e.abort(id(7)), Err(RequestError::Unknown(id(7))));
    e.add_request(req(8, prompt(0, 4), 1)).unwrap();
    e.abort(id(8)).unwrap();
    assert_eq!(e.abort(id(8)), Err(RequestError::Unknown(id(8))));
}
