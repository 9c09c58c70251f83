//! Turning `/`-separated paths into `Twalk` requests.

use toolsrv_wire::{Body, MAXWELEM};

use crate::conn::Req;

/// The path's elements: empty elements and `.` are skipped, so `""`, `"/"`
/// and `"./"` all name the root.
pub(crate) fn elements(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|e| !e.is_empty() && *e != ".")
        .collect()
}

/// The `Twalk` requests that walk `from` to `newfid` along `names`, at most
/// [`MAXWELEM`] names each (at least one request, so that an empty path clones
/// the fid), and the number of names in each.
pub(crate) fn walk_reqs(from: u32, newfid: u32, names: &[&str]) -> (Vec<Req<'static>>, Vec<usize>) {
    let mut reqs = Vec::with_capacity(names.len() / MAXWELEM + 1);
    let mut counts = Vec::with_capacity(names.len() / MAXWELEM + 1);
    let mut chunks = names.chunks(MAXWELEM);
    let first = chunks.next().unwrap_or(&[]);
    let mut push = |fid: u32, chunk: &[&str]| {
        counts.push(chunk.len());
        reqs.push(Req::body(Body::Twalk {
            fid,
            newfid,
            wnames: chunk.iter().map(|s| (*s).to_owned()).collect(),
        }));
    };
    push(from, first);
    for chunk in chunks {
        push(newfid, chunk);
    }
    (reqs, counts)
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

    #[test]
    fn root_paths_have_no_elements() {
        for p in ["", "/", "//", "./", "/./"] {
            assert!(elements(p).is_empty(), "{p:?}");
        }
        assert_eq!(elements("/proc//3/out/"), vec!["proc", "3", "out"]);
    }

    #[test]
    fn empty_path_clones_the_fid() {
        let (reqs, counts) = walk_reqs(0, 5, &[]);
        assert_eq!(counts, vec![0]);
        assert_eq!(wnames(&reqs[0]), (0, 5, vec![]));
    }

    #[test]
    fn long_paths_are_walked_in_chunks_of_16() {
        let names: Vec<String> = (0..35).map(|i| format!("d{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (reqs, counts) = walk_reqs(0, 9, &refs);
        assert_eq!(counts, vec![16, 16, 3]);
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
