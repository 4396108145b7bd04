//! `scripted-llm --port N`: runs the scripted model test double as a process
//! (for local demos and tests that need a separate process): OpenAI chat
//! completions under `/v1`, Anthropic Messages at `/v1/messages`, Bedrock
//! ConverseStream at `/model/{modelId}/converse-stream`. Prints the `/v1`
//! base URL.

use clap::Parser;

#[derive(Parser)]
#[command(
    about = "Scripted model endpoint speaking OpenAI, Anthropic and Bedrock ConverseStream (a test double: answers schema-shaped JSON)"
)]
struct Arguments {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let arguments = Arguments::parse();
    let server =
        scripted_llm::ScriptedLlmServer::start_on(&format!("127.0.0.1:{}", arguments.port)).await?;
    println!("{}", server.base_url());
    tokio::signal::ctrl_c().await?;
    drop(server);
    Ok(())
}
