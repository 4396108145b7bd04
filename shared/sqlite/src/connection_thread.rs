//! The connection's own thread. Every store call is a job sent to it over a
//! channel and answered through a oneshot; the thread runs the jobs one after
//! the other, so the connection needs no lock and a hundred concurrent steps
//! do not become a hundred blocking threads waking each other on a mutex
//! (measured: that contention cost more than the SQL). The thread ends when
//! the last clone of the store is dropped (the channel closes), closing the
//! connection.

use std::sync::mpsc;

use baton_runtime::error::StoreError;
use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::unavailable;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

pub(crate) struct ConnectionThread {
    jobs: mpsc::Sender<Job>,
}

impl ConnectionThread {
    /// Moves `connection` onto a thread of its own.
    pub(crate) fn start(mut connection: Connection) -> Result<Self, StoreError> {
        let (jobs, received) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("baton-sqlite".into())
            .spawn(move || {
                while let Ok(job) = received.recv() {
                    job(&mut connection);
                }
            })
            .map_err(|error| unavailable(format!("starting the connection thread: {error}")))?;
        Ok(ConnectionThread { jobs })
    }

    /// Runs `work` on the connection's thread and answers with its result. A
    /// job that panicked ends the thread: this call and every later one answer
    /// `Unavailable` instead of hanging.
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        self.jobs
            .send(Box::new(move |connection: &mut Connection| {
                let _ = answer.send(work(connection));
            }))
            .map_err(|_| unavailable("the connection thread has stopped"))?;
        answered
            .await
            .map_err(|_| unavailable("the connection thread stopped during the call"))?
    }
}
