//! The customer's KMS key (`CustomerKmsKey` in `infra/template.yaml`)
//! reaches everything that keeps data: with the parameter set, the runs
//! table, every queue and every log group are encrypted with the key, and
//! every function and the scheduler's role may use it; without it, none of
//! that is in the stack. Read from the template itself, so a resource added
//! later without the key fails here. (`infra/check-deploy.sh` starts the
//! built functions on a table and queues encrypted with a key, on moto.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_test_support::repository_path;
use serde_yaml::Value;

const THE_KEY: &str = "[CreatesCustomerKey, !GetAtt CustomerKey.Arn, !Ref CustomerKmsKey]";

fn template() -> (String, Value) {
    let text = std::fs::read_to_string(repository_path("infra/template.yaml")).unwrap();
    let parsed = serde_yaml::from_str(&text).unwrap();
    (text, parsed)
}

/// `!If [UsesCustomerKey, …, …]` as serde_yaml reads it: the tag and its
/// three arguments.
fn uses_the_key_if_given(value: &Value) -> Option<&Vec<Value>> {
    let Value::Tagged(tagged) = value else {
        return None;
    };
    let arguments = tagged.value.as_sequence()?;
    (tagged.tag == "If" && arguments.first()?.as_str() == Some("UsesCustomerKey"))
        .then_some(arguments)
}

fn names_the_key(value: &Value) -> bool {
    let Value::Tagged(tagged) = value else {
        return false;
    };
    let arguments = tagged.value.as_sequence();
    tagged.tag == "If"
        && arguments.is_some_and(|arguments| {
            arguments[0].as_str() == Some("CreatesCustomerKey") && arguments.len() == 3
        })
}

#[test]
fn every_store_of_data_is_encrypted_with_the_customers_key_when_given() {
    let (text, template) = template();
    assert!(
        text.matches(THE_KEY).count() >= 12,
        "the key's one expression is used throughout"
    );
    let parameter = &template["Parameters"]["CustomerKmsKey"];
    assert_eq!(
        parameter["Default"].as_str(),
        Some(""),
        "off unless asked for"
    );
    let key = &template["Resources"]["CustomerKey"];
    assert_eq!(key["Type"].as_str(), Some("AWS::KMS::Key"));
    assert_eq!(key["Condition"].as_str(), Some("CreatesCustomerKey"));
    assert_eq!(key["Properties"]["EnableKeyRotation"].as_bool(), Some(true));

    let mut checked = Vec::new();
    for (name, resource) in template["Resources"].as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        let properties = &resource["Properties"];
        let encrypted_by = match resource["Type"].as_str().unwrap() {
            "AWS::DynamoDB::Table" => {
                let sse =
                    uses_the_key_if_given(&properties["SSESpecification"]).unwrap_or_else(|| {
                        panic!("{name}: SSESpecification is not !If UsesCustomerKey")
                    });
                assert_eq!(sse[1]["SSEType"].as_str(), Some("KMS"), "{name}");
                Some(sse[1]["KMSMasterKeyId"].clone())
            }
            "AWS::SQS::Queue" => uses_the_key_if_given(&properties["KmsMasterKeyId"])
                .map(|arguments| arguments[1].clone()),
            "AWS::Logs::LogGroup" => {
                uses_the_key_if_given(&properties["KmsKeyId"]).map(|arguments| arguments[1].clone())
            }
            _ => continue,
        };
        let encrypted_by =
            encrypted_by.unwrap_or_else(|| panic!("{name} is not encrypted with the customer key"));
        assert!(names_the_key(&encrypted_by), "{name}: {encrypted_by:?}");
        checked.push(name.to_string());
    }
    // The table, four queues, five log groups.
    assert_eq!(checked.len(), 10, "{checked:?}");
}

#[test]
fn every_function_and_the_schedulers_role_may_use_the_key() {
    let (_, template) = template();
    let grants_the_key = |statement: &Value| {
        let actions: Vec<&str> = statement["Action"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        actions == ["kms:Decrypt", "kms:GenerateDataKey"] && names_the_key(&statement["Resource"])
    };
    let mut functions = 0;
    for (name, resource) in template["Resources"].as_mapping().unwrap() {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        functions += 1;
        let granted = resource["Properties"]["Policies"]
            .as_sequence()
            .into_iter()
            .flatten()
            .filter_map(uses_the_key_if_given)
            .any(|arguments| {
                arguments[1]["Statement"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .any(grants_the_key)
            });
        assert!(granted, "{name:?} may not use the customer key");
    }
    assert_eq!(functions, 5);
    let scheduler_statements = &template["Resources"]["SchedulerRole"]["Properties"]["Policies"][0]
        ["PolicyDocument"]["Statement"];
    assert!(
        scheduler_statements
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(uses_the_key_if_given)
            .any(|arguments| grants_the_key(&arguments[1])),
        "EventBridge Scheduler's role sends to the encrypted ingest queue"
    );
}
