//! Creating the DynamoDB table (key schema, the sparse outbox index, TTL):
//! for local emulators, tests and the CLI; the deployment creates it from
//! `infra/template.yaml`.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use baton_runtime::error::StoreError;

use crate::dynamodb::store::{DynamoRunStore, PENDING_OUTBOX_INDEX, sdk_failure, unavailable};

impl DynamoRunStore {
    /// Creates the table (and its TTL) if it does not exist: for local emulators and tests.
    /// Two processes starting at once may both find it missing: the one whose create is
    /// refused with `ResourceInUseException` takes the other's table as its own.
    pub async fn create_table_if_missing(&self) -> Result<(), StoreError> {
        let exists = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .is_ok();
        if exists {
            return Ok(());
        }
        let created = self
            .client
            .create_table()
            .table_name(&self.table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("pk")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(unavailable)?,
            )
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("sk")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(unavailable)?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("pk")
                    .key_type(KeyType::Hash)
                    .build()
                    .map_err(unavailable)?,
            )
            .key_schema(
                KeySchemaElement::builder()
                    .attribute_name("sk")
                    .key_type(KeyType::Range)
                    .build()
                    .map_err(unavailable)?,
            )
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("gsi1pk")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(unavailable)?,
            )
            .attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name("gsi1sk")
                    .attribute_type(ScalarAttributeType::S)
                    .build()
                    .map_err(unavailable)?,
            )
            .global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(PENDING_OUTBOX_INDEX)
                    .key_schema(
                        KeySchemaElement::builder()
                            .attribute_name("gsi1pk")
                            .key_type(KeyType::Hash)
                            .build()
                            .map_err(unavailable)?,
                    )
                    .key_schema(
                        KeySchemaElement::builder()
                            .attribute_name("gsi1sk")
                            .key_type(KeyType::Range)
                            .build()
                            .map_err(unavailable)?,
                    )
                    .projection(
                        Projection::builder()
                            .projection_type(ProjectionType::All)
                            .build(),
                    )
                    .build()
                    .map_err(unavailable)?,
            )
            .send()
            .await;
        match created {
            Ok(_) => {}
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_resource_in_use_exception()) =>
            {
                return Ok(());
            }
            Err(error) => {
                return Err(sdk_failure(error));
            }
        }
        self.client
            .update_time_to_live()
            .table_name(&self.table)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name("expiresAt")
                    .enabled(true)
                    .build()
                    .map_err(unavailable)?,
            )
            .send()
            .await
            .map_err(sdk_failure)?;
        Ok(())
    }
}
