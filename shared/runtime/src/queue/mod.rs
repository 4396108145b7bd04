//! What happens to a step message: the one table a worker reads after a
//! step (`disposition`: acknowledge, release, replace, give up), and the
//! dead-letter queue's reader that ends the run of whatever got there
//! (`dead_letters`). The queues themselves are adapters (`memory::queue`,
//! SQS in `baton-aws`).

pub mod dead_letters;
pub mod disposition;
