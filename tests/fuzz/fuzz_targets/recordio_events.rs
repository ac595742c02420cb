//! The input is a RecordIO stream as a master or agent would send it. Every record is
//! decoded as a scheduler and an executor Event, in protobuf and in JSON; whatever decodes
//! must re-encode stably. The stream is also read in small chunks, which must give the
//! same records as reading it whole.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::{de::DeserializeOwned, Serialize};
use std::io::{self, Read};
use storage_framework::mesos::proto::{DecodeErrorKind, Message};
use storage_framework::mesos::recordio::Reader;
use storage_framework::mesos::{executor, scheduler, Encoding};

/// Small enough that libFuzzer's inputs can hit the cap, large enough for real events.
const MAX_RECORD: usize = 1 << 16;

struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// The records up to the end of the stream or the first error, and whether it ended cleanly.
fn records<R: Read>(mut reader: Reader<R>) -> (Vec<Vec<u8>>, bool) {
    let mut out = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(r)) => out.push(r.to_vec()),
            Ok(None) => return (out, true),
            Err(e) => {
                // Formatting the error must not panic either.
                assert!(e.to_string().starts_with("recordio: "));
                return (out, false);
            }
        }
    }
}

fn check<M>(record: &[u8])
where
    M: Message + Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    match M::decode(record) {
        Ok(m) => {
            let again = m.encode();
            let m2 = M::decode(&again).expect("re-encoded protobuf must decode");
            assert_eq!(m2.encode(), again, "unstable protobuf re-encoding");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    match Encoding::Json.decode::<M>(record) {
        Ok(m) => {
            // Only success is required of the JSON round trip: serde_json's default float
            // parsing may move a long decimal by one ULP.
            let again = Encoding::Json.encode(&m);
            Encoding::Json
                .decode::<M>(&again)
                .expect("re-encoded JSON must decode");
            match M::decode(&m.encode()) {
                Ok(via_proto) => assert_eq!(via_proto, m, "JSON -> protobuf changed the message"),
                // serde_json allows deeper nesting than the protobuf decoder.
                Err(e) => assert_eq!(e.kind(), &DecodeErrorKind::TooDeep, "{e}"),
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (whole, clean) = records(Reader::with_max_record(data, MAX_RECORD));
    for record in &whole {
        check::<scheduler::Event>(record);
        check::<executor::Event>(record);
    }

    let chunk = data.len() % 7 + 1;
    let (chunked, chunked_clean) =
        records(Reader::with_max_record(Chunked { data, chunk }, MAX_RECORD));
    assert_eq!(chunked, whole, "chunk size {chunk} changed the records");
    assert_eq!(
        chunked_clean, clean,
        "chunk size {chunk} changed how the stream ended"
    );
});
