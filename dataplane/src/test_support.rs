//! Helpers shared by the crate's unit tests.

/// Runs `f` on a glommio executor small enough for an 8 MiB memlock limit.
pub(crate) fn run_glommio<F, Fut>(f: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .spawn(|| {
            crate::reactor::spawn_tick();
            f()
        })
        .expect("executor starts")
        .join()
        .expect("executor finishes");
}
