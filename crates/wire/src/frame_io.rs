//! Reading whole frames from a blocking byte stream.

use std::io::{self, Read};

use crate::message::HEADER_LEN;

/// Read one whole frame (`size[4]` included) from `r`.
///
/// The size field is checked before anything is allocated: below the 7-byte
/// header or above `max` (the negotiated msize) is an
/// [`io::ErrorKind::InvalidData`] error naming the size. End of stream before
/// or inside the frame is [`io::ErrorKind::UnexpectedEof`]. Decode the result
/// with [`crate::decode`].
pub fn read_frame(r: &mut impl Read, max: u32) -> io::Result<Vec<u8>> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size)?;
    let n = u32::from_le_bytes(size);
    if (n as usize) < HEADER_LEN || n > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame size {n} is outside {HEADER_LEN}..={max}"),
        ));
    }
    let mut frame = vec![0u8; n as usize];
    frame[..4].copy_from_slice(&size);
    r.read_exact(&mut frame[4..])?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode_to_vec, Body, Frame};

    #[test]
    fn reads_back_to_back_frames_and_stops_at_eof() {
        let a = Frame {
            tag: 1,
            body: Body::Tclunk { fid: 7 },
        };
        let b = Frame {
            tag: 2,
            body: Body::Rclunk,
        };
        let mut bytes = encode_to_vec(&a);
        bytes.extend(encode_to_vec(&b));
        let mut r = &bytes[..];
        assert_eq!(decode(&read_frame(&mut r, 8192).unwrap()).unwrap(), a);
        assert_eq!(decode(&read_frame(&mut r, 8192).unwrap()).unwrap(), b);
        let eof = read_frame(&mut r, 8192).unwrap_err();
        assert_eq!(eof.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn refuses_sizes_outside_the_header_and_msize_before_allocating() {
        for size in [0u32, 6, 8193, u32::MAX] {
            let mut r = &size.to_le_bytes()[..];
            let e = read_frame(&mut r, 8192).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{size}");
            assert!(e.to_string().contains(&size.to_string()), "{e}");
        }
    }

    #[test]
    fn a_frame_cut_short_is_unexpected_eof() {
        let bytes = encode_to_vec(&Frame {
            tag: 1,
            body: Body::Tclunk { fid: 7 },
        });
        let mut r = &bytes[..bytes.len() - 1];
        let e = read_frame(&mut r, 8192).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
