//! Open-loop load generator: requests leave at scheduled times whatever the replies do,
//! and latency counts from the scheduled time (no coordinated omission, as in wrk2).

pub mod dist;
pub mod engine;
pub mod profile;
pub mod request;
pub mod sched;
mod timer;

pub use timer::SPIN_MARGIN;

pub use engine::{run, Options, Report};
