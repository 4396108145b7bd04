//! A task's stream (A2A `SendStreamingMessage`, `SubscribeToTask`): the
//! task, a `working` update per frame, then its artifact and final status,
//! holding its lease in the tenant's stream budget while it lives.

use baton_runtime::services::Submitter;
use futures_util::StreamExt;

use super::protocol::{
    StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use super::task_mapping::frame_message;
use super::{A2aServer, Events, RpcFailure};
use crate::state::held_while;

impl A2aServer {
    /// The task now, a `working` update per frame after `after`, then the
    /// output artifact (completed runs) and the final status.
    /// The stream holds `ticket` (its lease in the tenant's stream budget)
    /// until it ends or the client goes away.
    pub(super) async fn stream_from(
        &self,
        run_id: String,
        after: u64,
        ticket: baton_runtime::services::StreamTicket,
    ) -> Result<Events, RpcFailure> {
        let first = self.task(&run_id).await?;
        let thread_id = first.context_id.clone();
        let frames = self.state.runs.follow(
            &self.tenant,
            &run_id,
            after,
            self.state.settings.poll_interval,
        );
        let updates = {
            let (run_id, thread_id) = (run_id.clone(), thread_id.clone());
            frames.map(move |frame| {
                StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                    task_id: run_id.clone(),
                    context_id: thread_id.clone(),
                    status: TaskStatus {
                        state: TaskState::TaskStateWorking,
                        message: Some(frame_message(&run_id, &thread_id, &frame)),
                        timestamp: Some(frame.timestamp.clone()),
                    },
                    metadata: None,
                })
            })
        };
        let server = A2aServer {
            state: self.state.clone(),
            tenant: self.tenant.clone(),
            submitter: Submitter::default(),
            answerer: self.answerer.clone(),
        };
        let ending = futures_util::stream::once(async move {
            let task = match server.task(&run_id).await {
                Ok(task) => task,
                Err(failure) => {
                    tracing::warn!(run_id, error = %failure.message, "a2a: the ended run could not be read");
                    return Vec::new();
                }
            };
            let mut last = Vec::new();
            if let Some(artifact) = task.artifacts.first() {
                last.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: task.id.clone(),
                    context_id: task.context_id.clone(),
                    artifact: artifact.clone(),
                    append: false,
                    last_chunk: true,
                }));
            }
            last.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: task.status.clone(),
                metadata: task.metadata.clone(),
            }));
            last
        })
        .flat_map(futures_util::stream::iter);
        Ok(held_while(
            futures_util::stream::once(async move { StreamResponse::Task(first) })
                .chain(updates)
                .chain(ending),
            ticket,
        )
        .boxed())
    }
}
