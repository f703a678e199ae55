//! Lowering the CPU priority of the calling thread, for work that should
//! yield the CPUs to a server on the same machine: the generator's builds
//! (batch work) and the api's search threads (so that reading requests and
//! writing answers never wait behind a search).

/// Raises the calling thread's niceness by `by` (to 19 at most). Linux
/// keeps a niceness per thread, and a thread starts with its starter's:
/// called before a process starts its threads, it lowers them all.
pub fn lower(by: u8) -> std::io::Result<()> {
    if by == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls about the calling thread's own id.
    unsafe {
        let thread = libc::gettid() as libc::id_t;
        let now = libc::getpriority(libc::PRIO_PROCESS, thread);
        if libc::setpriority(libc::PRIO_PROCESS, thread, (now + i32::from(by)).min(19)) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// A thread's niceness rises by what is asked, to 19 at most, and its
    /// starter's and siblings' stay as they were.
    #[test]
    fn a_thread_is_lowered_alone_and_never_past_19() {
        let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        let before = nice();
        let (lowered, capped) = std::thread::spawn(move || {
            super::lower(3).unwrap();
            let lowered = nice();
            super::lower(19).unwrap();
            (lowered, nice())
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + 3).min(19));
        assert_eq!(capped, 19);
        assert_eq!(nice(), before, "the starter's niceness is its own");
        let sibling = std::thread::spawn(nice).join().unwrap();
        assert_eq!(sibling, before);
    }
}
