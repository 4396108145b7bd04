//! A stand-in consensus node on a local port, for the browser tests:
//! `hcs-stand-in <operator account> <operator private key>` prints
//! `listening on http://127.0.0.1:{port}` and serves until stopped. Node
//! account `0.0.3`. A test double, never a network.

use baton_hcs::messages::AccountId;
use baton_hcs::operator::{account_from_text, public_key_of};
use baton_hcs::stand_in::StandInNode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [account, key] = arguments.as_slice() else {
        eprintln!(
            "usage: hcs-stand-in <operator account, e.g. 0.0.1001> <operator Ed25519 private key, hex>"
        );
        return std::process::ExitCode::from(2);
    };
    let operator = match account_from_text(account, "operator account") {
        Ok(operator) => operator,
        Err(error) => {
            eprintln!("{error}");
            return std::process::ExitCode::from(2);
        }
    };
    let public_key = match public_key_of(key, "operator key") {
        Ok(public_key) => public_key,
        Err(error) => {
            eprintln!("{error}");
            return std::process::ExitCode::from(2);
        }
    };
    let node = AccountId {
        shard_num: 0,
        realm_num: 0,
        account_num: 3,
    };
    match StandInNode::start(node, operator, public_key).await {
        Ok(stand_in) => {
            println!("listening on {}", stand_in.url);
            let _ = tokio::signal::ctrl_c().await;
            std::process::ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("cannot listen: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
