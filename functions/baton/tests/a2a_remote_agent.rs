//! A registered agent invoked as itself: a capability whose `remoteAgent`
//! names an agent served by the official `a2a-sdk` server
//! (`tests/a2a/remote_agent.py`, a test double of an agent service someone
//! else runs). Its card is checked at registration (a card that does not
//! answer is refused at `$.remoteAgent.cardUrl`); a plan requiring it sends
//! the node's request to the agent (the instructions and context bundle as
//! text, the output contract as the expected data part), streams its
//! progress as `delta` frames, re-prompts its contract-breaking first
//! answer, and completes. The other nodes' model is the scripted test
//! double of an LLM endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod serve_support;

use std::time::Duration;

use serde_json::{Value, json};
use serve_support::{TOKEN, example, model_environment, read_sse, repository, start_serve};

/// The remote agent on a free port; killed when dropped.
struct RemoteAgent {
    _child: tokio::process::Child,
    card_url: String,
    log: std::path::PathBuf,
}

async fn start_remote_agent(directory: &std::path::Path) -> RemoteAgent {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = directory.join("remote-agent.jsonl");
    let mut child = tokio::process::Command::new("python3")
        .arg(repository().join("tests/a2a/remote_agent.py"))
        .arg(port.to_string())
        .env("REMOTE_AGENT_LOG", &log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let card_url = format!("http://127.0.0.1:{port}/.well-known/agent-card.json");
    let client = reqwest::Client::new();
    // Importing the SDK takes seconds, more on a loaded 2-core machine: up
    // to 60 s (it failed at 10 s beside the rest of the suite).
    for _ in 0..600 {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the remote agent exited before serving its card: {status}");
        }
        if client
            .get(&card_url)
            .send()
            .await
            .is_ok_and(|response| response.status() == 200)
        {
            return RemoteAgent {
                _child: child,
                card_url,
                log,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the remote agent did not start");
}

fn remote_writer(card_url: &str) -> Value {
    json!({
        "capabilityId": "copywriter.Messaging.remote",
        "agentType": "ai",
        "version": "2026.11.28",
        "displayName": "Remote messaging writer",
        "summary": "Turns a positioning recommendation into a messaging stack, on an agent service of its own.",
        "inputContract": ["company_information", "positioning_context", "positioning_recommendation", "feedback"],
        "outputContract": ["messaging_stack", "handoff_summary"],
        "instructions": "Write the messaging stack for the recommended positioning.",
        "remoteAgent": {"cardUrl": card_url}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_a2a_agent_serves_a_node_and_is_re_prompted_on_a_broken_contract() {
    serve_support::ensure_python_packages("a2a.server", &["a2a-sdk[http-server]==1.3.0"]);
    let directory = tempfile::tempdir().unwrap();
    let agent = start_remote_agent(directory.path()).await;
    let model = scripted_llm::ScriptedLlmServer::start().await.unwrap();
    let mut environment = model_environment(&model);
    environment.push((
        "BATON_OUTBOUND_HTTP_HOSTS".to_string(),
        "127.0.0.1".to_string(),
    ));
    let serve = start_serve(&["--store", "memory"], &environment).await;
    let client = reqwest::Client::new();

    // A card that does not answer is refused at its path; nothing is stored.
    let broken_card = agent
        .card_url
        .replace("agent-card.json", "no-such-card.json");
    let refused = client
        .post(format!("{}/capabilities/register", serve.base))
        .bearer_auth(TOKEN)
        .json(&remote_writer(&broken_card))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(
        refused["error"]["details"]["path"], "$.remoteAgent.cardUrl",
        "{refused}"
    );

    let registered = client
        .post(format!("{}/capabilities/register", serve.base))
        .bearer_auth(TOKEN)
        .json(&remote_writer(&agent.card_url))
        .send()
        .await
        .unwrap();
    assert_eq!(
        registered.status(),
        200,
        "{}",
        registered.text().await.unwrap()
    );

    let mut envelope = example("positioning-recommendation.json");
    envelope["policies"] =
        json!({"planner": {"selection": {"require": ["copywriter.Messaging.remote"]}}});
    let response = client
        .post(format!("{}/run.stream", serve.base))
        .bearer_auth(TOKEN)
        .json(&envelope)
        .send()
        .await
        .unwrap();
    let frames = read_sse(response).await;
    let types: Vec<&str> = frames
        .iter()
        .map(|frame| frame["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.last(), Some(&"complete"), "{types:?}");
    let plan = frames
        .iter()
        .find(|frame| frame["type"] == "plan_generated")
        .unwrap();
    let remote_node = plan["payload"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|node| node["capabilityId"] == "copywriter.Messaging.remote")
        .expect("the plan places the remote agent")["nodeId"]
        .as_str()
        .unwrap()
        .to_string();
    let of_node = |kind: &str| {
        frames
            .iter()
            .filter(|frame| frame["type"] == kind && frame["nodeId"] == remote_node.as_str())
            .count()
    };
    assert_eq!(
        of_node("validation_error"),
        1,
        "the broken answer was judged: {types:?}"
    );
    assert_eq!(of_node("node_complete"), 1, "{types:?}");
    assert!(
        frames.iter().any(|frame| frame["type"] == "delta"
            && frame["nodeId"] == remote_node.as_str()
            && frame.to_string().contains("drafting the answer")),
        "the agent's progress streamed as deltas"
    );

    // What the agent received: the bundle as text, the contract as data;
    // the second call is the re-prompt naming what was wrong.
    let calls: Vec<Value> = std::fs::read_to_string(&agent.log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let text = calls[0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Write the messaging stack"),
        "the instructions: {text}"
    );
    assert!(
        text.contains("positioning_recommendation"),
        "the context bundle: {text}"
    );
    let schema = &calls[0]["parts"][1]["data"]["outputSchema"];
    assert!(
        schema["required"]
            .as_array()
            .unwrap()
            .contains(&json!("messaging_stack")),
        "the output contract: {schema}"
    );
    let again = calls[1]["parts"][0]["text"].as_str().unwrap();
    assert_ne!(again, text, "the re-prompt says what was wrong");
    println!(
        "the remote agent was called {} times; the run completed",
        calls.len()
    );
}
