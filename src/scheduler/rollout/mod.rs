//! Pure: the lifecycle's decisions. What the declared target is and when it moves to a new
//! generation (`target.rs`); whether a node may start the day-two step it asked for now, in
//! the vendor's upgrade order and under the disruption budget (`decide.rs`, on top of
//! `health::gate`); the plan as `/api/plan` shows it (`view.rs`).

pub mod decide;
pub mod record;
pub mod target;
pub mod view;
