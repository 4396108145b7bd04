//! Typed ids and the keys the stores address by. A run is addressed by its
//! tenant and its id together ([`RunKey`]), a chat thread by its tenant and
//! thread id ([`ThreadKey`]): one value, so the two halves cannot be
//! swapped, and a run's key cannot be given where a thread's is expected.
//!
//! The ids are views of the text the run state and the step message keep
//! (`#[repr(transparent)]` over `str`, made by `ref-cast`): a key costs two
//! pointers, nothing is copied or allocated to build one.

use ref_cast::RefCast;

/// A tenant's id: every key starts with it.
#[derive(RefCast, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct TenantId(str);

/// A run's id, unique within its tenant.
#[derive(RefCast, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct RunId(str);

/// A chat thread's id, unique within its tenant.
#[derive(RefCast, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct ThreadId(str);

macro_rules! id_views {
    ($($id:ident),*) => {$(
        impl $id {
            /// The id of this text.
            pub fn of(text: &str) -> &$id {
                $id::ref_cast(text)
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $id {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(&self.0)
            }
        }
    )*};
}

id_views!(TenantId, RunId, ThreadId);

/// Where a run lives: its tenant and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunKey<'a> {
    pub tenant: &'a TenantId,
    pub run: &'a RunId,
}

impl<'a> RunKey<'a> {
    /// The key of run `run_id` of tenant `tenant_id`.
    pub fn new(tenant_id: &'a str, run_id: &'a str) -> Self {
        RunKey {
            tenant: TenantId::of(tenant_id),
            run: RunId::of(run_id),
        }
    }

    /// The tenant's id as text.
    pub fn tenant_id(&self) -> &'a str {
        self.tenant.as_str()
    }

    /// The run's id as text.
    pub fn run_id(&self) -> &'a str {
        self.run.as_str()
    }
}

/// Where a chat thread lives: its tenant and its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadKey<'a> {
    pub tenant: &'a TenantId,
    pub thread: &'a ThreadId,
}

impl<'a> ThreadKey<'a> {
    /// The key of thread `thread_id` of tenant `tenant_id`.
    pub fn new(tenant_id: &'a str, thread_id: &'a str) -> Self {
        ThreadKey {
            tenant: TenantId::of(tenant_id),
            thread: ThreadId::of(thread_id),
        }
    }

    /// The tenant's id as text.
    pub fn tenant_id(&self) -> &'a str {
        self.tenant.as_str()
    }

    /// The thread's id as text.
    pub fn thread_id(&self) -> &'a str {
        self.thread.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_the_text_it_was_made_of() {
        let tenant = String::from("tenant-a");
        let run = String::from("run-1");
        let key = RunKey::new(&tenant, &run);
        assert_eq!((key.tenant_id(), key.run_id()), ("tenant-a", "run-1"));
        assert_eq!(key.run.to_string(), "run-1");
        assert_eq!(key, RunKey::new("tenant-a", "run-1"));
        assert_ne!(key, RunKey::new("tenant-a", "run-2"));
        let thread = ThreadKey::new("tenant-a", "thread-1");
        assert_eq!(
            (thread.tenant_id(), thread.thread_id()),
            ("tenant-a", "thread-1")
        );
    }
}
