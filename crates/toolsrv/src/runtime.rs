//! The client side's async runtime: one current-thread runtime per command.

use std::future::Future;

/// Runs `f` to completion on a current-thread runtime; `None` (said on
/// stderr) when the runtime cannot start.
pub fn block_on<F: Future>(f: F) -> Option<F::Output> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => Some(rt.block_on(f)),
        Err(e) => {
            crate::logwriter::say!("toolsrv: cannot start the async runtime: {e}");
            None
        }
    }
}
