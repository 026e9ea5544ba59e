//! A guard against lost io_uring wake-ups. On this project's Linux 6.18 VMs a glommio
//! executor was seen asleep in `io_uring_enter` (waiting for one completion, no
//! timeout) with the completion it waited for already due: no CQE arrived until a
//! signal interrupted the wait (a debugger attaching was enough), and then it went on
//! at once. glommio sleeps without a timeout only when no timer is armed, so one timer
//! that fires every [`TICK`] keeps every sleep bounded: a lost wake-up costs at most one
//! tick instead of forever. The cost is [`TICK`]'s wake-ups of an idle executor (100 a
//! second: microseconds of CPU).

use std::time::Duration;

/// The longest an executor sleeps.
pub const TICK: Duration = Duration::from_millis(10);

/// Arms the tick on the current glommio executor (once per executor, at its start).
pub fn spawn_tick() {
    glommio::spawn_local(async {
        loop {
            glommio::timer::sleep(TICK).await;
        }
    })
    .detach();
}
