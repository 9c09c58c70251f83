//! Locking a mutex whose holder panicked.

use std::sync::{Mutex, MutexGuard};

/// [`Mutex::lock`] that takes the data of a poisoned mutex as it is.
///
/// A panic while the lock was held (a bug, already logged by the panic hook)
/// must not take every later user of the mutex down with it: the daemon goes
/// on with the data as the panicking holder left it. Use it for state whose
/// every update leaves it consistent (a single insert, remove or assignment
/// under the lock), as every toolsrv lock that uses it does.
pub trait LockUnpoisoned<T: ?Sized> {
    /// Lock, ignoring poison.
    fn lock_unpoisoned(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockUnpoisoned<T> for Mutex<T> {
    fn lock_unpoisoned(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_mutex_still_locks_with_its_data() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = m2.lock().expect("first lock");
            *g = 2;
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*m.lock_unpoisoned(), 2);
    }
}
