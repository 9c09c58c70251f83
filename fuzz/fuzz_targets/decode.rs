//! Fuzz target: decode arbitrary bytes as a frame and as a stat entry; whatever
//! decodes must re-encode to exactly the input bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = toolsrv_wire::decode(data) {
        let again = toolsrv_wire::encode_to_vec(&frame);
        assert_eq!(again, data, "re-encoding {frame:?} changed the bytes");
        assert_eq!(toolsrv_wire::decode(&again), Ok(frame));
    }
    if let Ok((stat, used)) = toolsrv_wire::decode_stat(data) {
        let mut again = Vec::new();
        toolsrv_wire::encode_stat(&stat, &mut again);
        assert_eq!(again, &data[..used], "re-encoding {stat:?} changed the bytes");
    }
});
