//! Walking a new fid to a `/`-separated path: the `Twalk` requests at the head
//! of a pipelined batch, and the check of their replies.

use toolsrv_wire::{Body, MAXWELEM};

use crate::conn::{Pending, Req};
use crate::error::ClientError;
use crate::reply;

/// The path's elements: empty elements and `.` are skipped, so `""`, `"/"`
/// and `"./"` all name the root.
fn elements(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|e| !e.is_empty() && *e != ".")
        .collect()
}

/// The walk of a new fid to `path`.
pub(crate) struct Walk<'p> {
    path: &'p str,
    names: Vec<&'p str>,
}

impl<'p> Walk<'p> {
    /// The walk to `path`.
    pub(crate) fn new(path: &'p str) -> Self {
        Walk {
            path,
            names: elements(path),
        }
    }

    /// The names of each `Twalk`: at most [`MAXWELEM`], and at least one
    /// (empty) request, so that an empty path clones the fid.
    fn chunks(&self) -> impl Iterator<Item = &[&'p str]> {
        let clone = self.names.is_empty().then_some(&[][..]);
        self.names.chunks(MAXWELEM).chain(clone)
    }

    /// The `Twalk` requests that walk `from` to `newfid`: the first from
    /// `from`, the following ones (paths of more than [`MAXWELEM`] names)
    /// from `newfid`.
    pub(crate) fn reqs(&self, from: u32, newfid: u32) -> Vec<Req<'static>> {
        self.chunks()
            .enumerate()
            .map(|(i, chunk)| {
                Req::body(Body::Twalk {
                    fid: if i == 0 { from } else { newfid },
                    newfid,
                    wnames: chunk.iter().map(|s| (*s).to_owned()).collect(),
                })
            })
            .collect()
    }

    /// Await the replies to [`Walk::reqs`], the first ones of `pending`.
    ///
    /// A failure to get a reply (the connection died) is the outer error and
    /// returned at once. Otherwise every walk reply is awaited, and the first
    /// failure among them is returned inside: an `Rwalk` that stopped
    /// part-way becomes `Server("file not found: <path>")`, an `Rerror` its
    /// message. The caller collects the rest of its batch's replies and then
    /// reports this error first; its fid guard (or a pipelined `Tclunk`)
    /// clunks the fid.
    pub(crate) async fn replies(
        &self,
        pending: &mut impl Iterator<Item = Pending>,
    ) -> Result<Option<ClientError>, ClientError> {
        let mut first_err = None;
        for (chunk, p) in self.chunks().zip(pending) {
            let walked = reply::walk(p.await?, chunk.len(), self.path);
            if first_err.is_none() {
                first_err = walked.err();
            }
        }
        Ok(first_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Msg;

    fn wnames(req: &Req<'_>) -> (u32, u32, Vec<String>) {
        match &req.msg {
            Msg::Body(Body::Twalk {
                fid,
                newfid,
                wnames,
            }) => (*fid, *newfid, wnames.clone()),
            _ => panic!("not a Twalk"),
        }
    }

    fn counts(w: &Walk<'_>) -> Vec<usize> {
        w.chunks().map(<[&str]>::len).collect()
    }

    #[test]
    fn root_paths_have_no_elements() {
        for p in ["", "/", "//", "./", "/./"] {
            assert!(elements(p).is_empty(), "{p:?}");
        }
        assert_eq!(elements("/proc//3/out/"), vec!["proc", "3", "out"]);
    }

    #[test]
    fn empty_path_clones_the_fid() {
        let w = Walk::new("/");
        let reqs = w.reqs(0, 5);
        assert_eq!(counts(&w), vec![0]);
        assert_eq!(reqs.len(), 1);
        assert_eq!(wnames(&reqs[0]), (0, 5, vec![]));
    }

    #[test]
    fn short_paths_are_walked_in_one_request() {
        let w = Walk::new("proc/3/out");
        let reqs = w.reqs(0, 7);
        assert_eq!(counts(&w), vec![3]);
        assert_eq!(reqs.len(), 1);
        assert_eq!(
            wnames(&reqs[0]),
            (0, 7, vec!["proc".into(), "3".into(), "out".into()])
        );
    }

    #[test]
    fn long_paths_are_walked_in_chunks_of_16() {
        let names: Vec<String> = (0..35).map(|i| format!("d{i}")).collect();
        let path = names.join("/");
        let w = Walk::new(&path);
        let reqs = w.reqs(0, 9);
        assert_eq!(counts(&w), vec![16, 16, 3]);
        assert_eq!(reqs.len(), 3);
        let (f, n, w) = wnames(&reqs[0]);
        assert_eq!((f, n, w.len(), w[0].as_str()), (0, 9, 16, "d0"));
        let (f, n, w) = wnames(&reqs[1]);
        assert_eq!((f, n, w[0].as_str()), (9, 9, "d16"));
        let (f, n, w) = wnames(&reqs[2]);
        assert_eq!(
            (f, n, w),
            (9, 9, vec!["d32".into(), "d33".into(), "d34".into()])
        );
    }
}
