//! How Baton reaches AWS: one [`AwsConnection`] (endpoint, region,
//! credentials) every adapter of this crate is made from, so no SDK type
//! appears in an adapter's public constructor. The SDK clients are built
//! here and stay inside the crate.

/// The endpoint, region and credentials the adapters use.
#[derive(Clone, Debug)]
pub struct AwsConnection {
    configuration: aws_config::SdkConfig,
}

/// The region an emulator connection uses.
pub const EMULATOR_REGION: &str = "us-east-1";

impl AwsConnection {
    /// From the environment and the SDK's usual sources: `AWS_ENDPOINT_URL`,
    /// `AWS_REGION`, a profile, or the Lambda function's role.
    pub async fn from_environment() -> Self {
        AwsConnection {
            configuration: aws_config::defaults(aws_config::BehaviorVersion::latest())
                .load()
                .await,
        }
    }

    /// An AWS emulator (the moto server, in tests and `infra/local.sh`) at
    /// `endpoint_url`: region `us-east-1`, a dummy key pair (emulators accept
    /// any).
    pub async fn to_emulator(endpoint_url: &str) -> Self {
        AwsConnection {
            configuration: aws_config::defaults(aws_config::BehaviorVersion::latest())
                .endpoint_url(endpoint_url)
                .region(aws_config::Region::new(EMULATOR_REGION))
                .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                    "test", "test", None, None, "emulator",
                ))
                .load()
                .await,
        }
    }

    /// The SDK configuration (the secret store signs its own requests).
    #[cfg(feature = "secrets")]
    pub(crate) fn configuration(&self) -> &aws_config::SdkConfig {
        &self.configuration
    }

    pub(crate) fn dynamodb_client(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.configuration)
    }

    pub(crate) fn sqs_client(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.configuration)
    }

    /// Bedrock's runtime client, its own retries off (the provider retries
    /// first responses and broken streams alike).
    #[cfg(feature = "bedrock")]
    pub(crate) fn bedrock_client(&self) -> aws_sdk_bedrockruntime::Client {
        let configuration = aws_sdk_bedrockruntime::config::Builder::from(&self.configuration)
            .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
            .build();
        aws_sdk_bedrockruntime::Client::from_conf(configuration)
    }

    #[cfg(feature = "scheduler")]
    pub(crate) fn scheduler_client(&self) -> aws_sdk_scheduler::Client {
        aws_sdk_scheduler::Client::new(&self.configuration)
    }

    #[cfg(feature = "event-bus")]
    pub(crate) fn eventbridge_client(&self) -> aws_sdk_eventbridge::Client {
        aws_sdk_eventbridge::Client::new(&self.configuration)
    }
}

/// Adapters over SDK clients a test configured itself (an interceptor that
/// records or fails calls): the `testing` feature only, never in a
/// production build.
#[cfg(feature = "testing")]
pub mod from_clients {
    use crate::{DynamoRunStore, SqsStepQueue};

    /// The run store over `client`.
    pub fn dynamodb_store(client: aws_sdk_dynamodb::Client, table: &str) -> DynamoRunStore {
        DynamoRunStore::over_client(client, table)
    }

    /// The step queue over `client`.
    pub fn sqs_queue(client: aws_sdk_sqs::Client, queue_url: &str) -> SqsStepQueue {
        SqsStepQueue::over_client(client, queue_url)
    }

    /// EventBridge Scheduler's triggers over `client`.
    #[cfg(feature = "scheduler")]
    pub fn scheduler_triggers(
        client: aws_sdk_scheduler::Client,
        target: crate::SchedulerTarget,
    ) -> crate::EventBridgeScheduleTriggers {
        crate::EventBridgeScheduleTriggers::over_client(client, target)
    }
}
