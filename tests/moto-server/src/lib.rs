//! Test support: the moto server that emulates DynamoDB and SQS for
//! integration tests. `BATON_TEST_AWS_ENDPOINT` points at one that is
//! already running (CI starts one); otherwise [`MotoServer::start`] runs
//! `moto_server` on a free port and stops exactly that process on drop.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `infra/moto_isolated.py`, found from the running test's package upwards.
///
/// Read at run time, not baked in with `env!`: the target directory is shared
/// between checkouts (CI's clean clone, the working tree), and cargo reuses
/// this crate's build across them, so a compile-time path can name a
/// checkout that is gone.
fn moto_launcher() -> Result<std::path::PathBuf, String> {
    let start = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .ok_or("neither CARGO_MANIFEST_DIR nor the current directory is known")?;
    start
        .ancestors()
        .map(|directory| directory.join("infra/moto_isolated.py"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| format!("infra/moto_isolated.py not found above {}", start.display()))
}

/// A file of the repository (`infra/template.yaml`, …), found from the
/// running test's package upwards, as [`moto_launcher`] finds its script.
fn repository_file(relative: &str) -> Result<std::path::PathBuf, String> {
    let launcher = moto_launcher()?;
    let root = launcher
        .parent()
        .and_then(std::path::Path::parent)
        .ok_or("infra/moto_isolated.py has no repository above it")?;
    let path = root.join(relative);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} not found", path.display()))
    }
}

/// The step queue's timings as the deployment ships them: the `Timeouts`
/// mapping of `infra/template.yaml`, which `infra/local.sh` reads too. One
/// set for the cloud, the local stack and every AWS-path test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShippedStepTimings {
    /// The step queue's own visibility timeout (what a Lambda's records
    /// start hidden for, before the handler holds them for one lease).
    pub queue_visibility_seconds: u32,
    /// The redrive policy's `maxReceiveCount`.
    pub max_receive_count: u32,
    /// `BATON_NODE_LEASE_SECONDS`: a node's lease, and how long a worker
    /// holds a step's message hidden at a time.
    pub node_lease_seconds: u32,
    /// The step function's timeout.
    pub function_seconds: u32,
    /// `BATON_LLM_TIMEOUT_SECONDS`: one model request's limit.
    pub model_request_seconds: u32,
    /// The sweeper's `BATON_SWEEP_AFTER_SECONDS`: how long an outbox entry
    /// is quiet before it re-drives it.
    pub sweep_after_seconds: u32,
    /// How often the sweeper runs (its schedule's `rate(...)`).
    pub sweeper_every_seconds: u32,
    /// The sweeper function's timeout (what one invocation's retention
    /// pass must end within).
    pub sweeper_function_seconds: u32,
}

/// Reads [`ShippedStepTimings`] from `infra/template.yaml`.
pub fn shipped_step_timings() -> Result<ShippedStepTimings, String> {
    let path = repository_file("infra/template.yaml")?;
    let text =
        std::fs::read_to_string(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let template: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
    let step = &template["Mappings"]["Timeouts"]["Step"];
    let seconds = |name: &str| -> Result<u32, String> {
        step[name]
            .as_u64()
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| {
                format!("infra/template.yaml: Mappings.Timeouts.Step.{name} is not a whole number")
            })
    };
    Ok(ShippedStepTimings {
        queue_visibility_seconds: seconds("QueueVisibilitySeconds")?,
        max_receive_count: seconds("MaxReceiveCount")?,
        node_lease_seconds: seconds("NodeLeaseSeconds")?,
        function_seconds: seconds("FunctionSeconds")?,
        model_request_seconds: seconds("ModelRequestSeconds")?,
        sweep_after_seconds: template["Mappings"]["Timeouts"]["Sweeper"]["OutboxAfterSeconds"]
            .as_u64()
            .and_then(|value| u32::try_from(value).ok())
            .ok_or("infra/template.yaml: Mappings.Timeouts.Sweeper.OutboxAfterSeconds is not a whole number")?,
        sweeper_every_seconds: schedule_rate_seconds(
            template["Resources"]["SweeperFunction"]["Properties"]["Events"]["EveryMinute"]
                ["Properties"]["Schedule"]
                .as_str()
                .unwrap_or_default(),
        )?,
        sweeper_function_seconds: template["Resources"]["SweeperFunction"]["Properties"]
            ["Timeout"]
            .as_u64()
            .and_then(|value| u32::try_from(value).ok())
            .ok_or("infra/template.yaml: Resources.SweeperFunction.Properties.Timeout is not a whole number")?,
    })
}

/// The seconds of an EventBridge `rate(N unit)` expression.
fn schedule_rate_seconds(expression: &str) -> Result<u32, String> {
    let refused = || format!("the sweeper's schedule `{expression}` is not rate(N minutes|hours)");
    let inner = expression
        .strip_prefix("rate(")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(refused)?;
    let (count, unit) = inner.split_once(' ').ok_or_else(refused)?;
    let count: u32 = count.parse().map_err(|_| refused())?;
    let unit_seconds = match unit.trim_end_matches('s') {
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        _ => return Err(refused()),
    };
    Ok(count * unit_seconds)
}

/// A step queue and its dead-letter queue as the template ships them.
#[derive(Debug, Clone)]
pub struct ShippedStepQueue {
    pub queue_url: String,
    pub dead_letter_queue_url: String,
    pub timings: ShippedStepTimings,
}

/// Creates a step queue named after `prefix` (made unique) with the
/// shipped visibility timeout and redrive policy (to a dead-letter queue
/// of its own), as `infra/template.yaml` and `infra/local.sh` create it.
pub async fn create_shipped_step_queue(
    configuration: &aws_config::SdkConfig,
    prefix: &str,
) -> Result<ShippedStepQueue, String> {
    use aws_sdk_sqs::types::QueueAttributeName;
    let timings = shipped_step_timings()?;
    let client = aws_sdk_sqs::Client::new(configuration);
    let dead_letter_queue_url =
        create_unique_queue(configuration, &format!("{prefix}-dlq"), None).await?;
    let dead_letter_arn = queue_arn(configuration, &dead_letter_queue_url).await?;
    let redrive = format!(
        r#"{{"deadLetterTargetArn":"{dead_letter_arn}","maxReceiveCount":"{}"}}"#,
        timings.max_receive_count
    );
    let queue_url = client
        .create_queue()
        .queue_name(unique_name(prefix))
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            timings.queue_visibility_seconds.to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await
        .map_err(|error| {
            format!(
                "creating queue {prefix}: {}",
                aws_sdk_sqs::error::DisplayErrorContext(error)
            )
        })?
        .queue_url
        .ok_or_else(|| format!("moto returned no URL for queue {prefix}"))?;
    Ok(ShippedStepQueue {
        queue_url,
        dead_letter_queue_url,
        timings,
    })
}

/// A running emulator.
pub struct MotoServer {
    pub endpoint: String,
    child: Option<Child>,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl MotoServer {
    /// The shared endpoint, or a fresh `moto_server` child.
    pub fn start() -> Result<MotoServer, String> {
        if let Ok(endpoint) = std::env::var("BATON_TEST_AWS_ENDPOINT") {
            return Ok(MotoServer {
                endpoint,
                child: None,
            });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map_err(|error| format!("no free port: {error}"))?
            .port();
        // moto does not isolate concurrent DynamoDB transactions; the launcher
        // serializes DynamoDB requests so tests see DynamoDB's semantics.
        let launcher = moto_launcher()?;
        let child = Command::new("python3")
            .arg(&launcher)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start moto_server ({error}); install it with `pip install \"moto[server]\"` (.ci/run does)"))?;
        let server = MotoServer {
            endpoint: format!("http://127.0.0.1:{port}"),
            child: Some(child),
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "moto_server did not accept connections on port {port}"
        ))
    }

    /// AWS SDK configuration for this emulator: its endpoint, `us-east-1`,
    /// dummy credentials (moto accepts any).
    pub async fn sdk_configuration(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "moto",
            ))
            .load()
            .await
    }

    /// Environment for a child process using the emulator through the AWS SDK.
    pub fn sdk_environment(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ]
    }
}

/// Creates a standard queue named after `prefix` (made unique) on the
/// emulator `configuration` points at, with a visibility timeout when given;
/// returns its URL.
pub async fn create_unique_queue(
    configuration: &aws_config::SdkConfig,
    prefix: &str,
    visibility_timeout_seconds: Option<u32>,
) -> Result<String, String> {
    let mut request = aws_sdk_sqs::Client::new(configuration)
        .create_queue()
        .queue_name(unique_name(prefix));
    if let Some(seconds) = visibility_timeout_seconds {
        request = request.attributes(
            aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
            seconds.to_string(),
        );
    }
    request
        .send()
        .await
        .map_err(|error| {
            format!(
                "creating queue {prefix}: {}",
                aws_sdk_sqs::error::DisplayErrorContext(error)
            )
        })?
        .queue_url
        .ok_or_else(|| format!("moto returned no URL for queue {prefix}"))
}

/// The ARN of the queue at `queue_url` (a rule's target names queues by ARN).
pub async fn queue_arn(
    configuration: &aws_config::SdkConfig,
    queue_url: &str,
) -> Result<String, String> {
    let attributes = aws_sdk_sqs::Client::new(configuration)
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|error| {
            format!(
                "reading the ARN of {queue_url}: {}",
                aws_sdk_sqs::error::DisplayErrorContext(error)
            )
        })?
        .attributes
        .unwrap_or_default();
    attributes
        .get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .cloned()
        .ok_or_else(|| format!("moto returned no ARN for {queue_url}"))
}

/// A name no other test uses (tables and queues are per test: moto slows down as they grow).
///
/// The process id, a per-process counter and the clock: two tests of one binary
/// that ask in the same clock tick still get different names (the clock alone
/// once gave two concurrent tests one table and one queue on a shared server).
pub fn unique_name(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let sequence = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{sequence}-{nanos}", std::process::id())
}

/// One JSON 1.1 call to the emulator, as the AWS CLI of an operator would
/// send it (moto routes by the credential scope and does not check the
/// signature): the set-up of secrets a test reads through Baton's own
/// signed client.
async fn operator_call(
    endpoint: &str,
    service: &str,
    target: &str,
    body: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let response = reqwest::Client::new()
        .post(format!("{endpoint}/"))
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amz-target", target)
        .header(
            "authorization",
            format!(
                "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
            ),
        )
        .body(body.to_string())
        .send()
        .await
        .map_err(|error| format!("{target}: {error}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!("{target}: HTTP {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|error| format!("{target}: {error}"))
}

/// Creates a Secrets Manager secret holding `secret_string`; answers its ARN.
pub async fn put_secret(endpoint: &str, name: &str, secret_string: &str) -> Result<String, String> {
    let answer = operator_call(
        endpoint,
        "secretsmanager",
        "secretsmanager.CreateSecret",
        serde_json::json!({"Name": name, "SecretString": secret_string}),
    )
    .await?;
    answer["ARN"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("CreateSecret answered no ARN: {answer}"))
}

/// Puts an SSM `SecureString` parameter.
pub async fn put_secure_parameter(endpoint: &str, name: &str, value: &str) -> Result<(), String> {
    operator_call(
        endpoint,
        "ssm",
        "AmazonSSM.PutParameter",
        serde_json::json!({"Name": name, "Value": value, "Type": "SecureString", "Overwrite": true}),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_asked_for_at_once_on_many_threads_are_all_different() {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..500)
                        .map(|_| super::unique_name("t"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut names = std::collections::BTreeSet::new();
        for thread in threads {
            for name in thread.join().expect("a naming thread panicked") {
                assert!(names.insert(name.clone()), "{name} was given twice");
            }
        }
        assert_eq!(names.len(), 4_000);
    }
}
