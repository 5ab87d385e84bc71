//! Writes seed corpora for the fuzz targets into `fuzz/corpus/<target>/`.
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seeds [CAPTURED_DIR] [OUT_DIR]
//! ```
//!
//! CAPTURED_DIR (default `crates/protocol/tests/corpus`) holds frames captured
//! from real clients, one `NNNN-<Api>-v<N>-{request,response}.bin` file per
//! frame with the size prefix removed; it may be missing. Besides those, the
//! seeds are synthesized: a minimal request and response body for every API
//! and version that has one, record batches from the builder with every
//! codec and batch kind, the batches found inside captured Produce requests
//! and Fetch responses, and compressed data for every codec.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use krabka_protocol::compression::{compress, Compression};
use krabka_protocol::frame::{parse_response_header, RequestFrame};
use krabka_protocol::records::{NewHeader, NewRecord, RecordBatchBuilder};
use krabka_protocol::{
    ApiKey, FetchResponse, Message, ProduceRequest, RequestBody, RequestHeader, ResponseBody, API_TABLE,
};

struct Corpus {
    dir: PathBuf,
    written: BTreeSet<Vec<u8>>,
}

impl Corpus {
    fn new(root: &Path, target: &str) -> Corpus {
        let dir = root.join(target);
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Corpus { dir, written: BTreeSet::new() }
    }

    /// Writes one seed, skipping duplicates.
    fn add(&mut self, name: &str, data: &[u8]) {
        if !self.written.insert(data.to_vec()) {
            return;
        }
        let path = self.dir.join(format!("seed-{:04}-{name}", self.written.len()));
        fs::write(&path, data).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// The response target's 4-byte selector: index into `ApiKey::ALL`, then the
/// version as an offset from the API's minimum.
fn response_selector(api_key: ApiKey, version: i16) -> [u8; 4] {
    let index = ApiKey::ALL.iter().position(|&k| k == api_key).expect("every key is in ALL") as u16;
    let offset = (version - api_key.info().min_version) as u16;
    let mut selector = [0u8; 4];
    selector[..2].copy_from_slice(&index.to_be_bytes());
    selector[2..].copy_from_slice(&offset.to_be_bytes());
    selector
}

/// Small bodies that decode as something for most messages: zeros read as
/// empty strings and arrays in classic versions, 0x01 bytes as empty compact
/// strings and arrays in flexible ones.
fn filler_bodies() -> [Bytes; 2] {
    [Bytes::from(vec![0u8; 512]), Bytes::from(vec![1u8; 512])]
}

/// "0031-Produce-v13-request.bin" -> ("Produce", 13, "request").
fn parse_captured_name(name: &str) -> Option<(&str, i16, &str)> {
    let stem = name.strip_suffix(".bin")?;
    let mut parts = stem.splitn(2, '-');
    parts.next()?;
    let rest = parts.next()?;
    let (rest, direction) = rest.rsplit_once('-')?;
    let (api, version) = rest.rsplit_once("-v")?;
    Some((api, version.parse().ok()?, direction))
}

fn api_key_named(name: &str) -> Option<ApiKey> {
    API_TABLE.iter().find(|info| info.name == name).map(|info| info.key)
}

fn captured_frames(dir: &Path) -> Vec<(PathBuf, ApiKey, i16, String)> {
    let mut frames = Vec::new();
    let Ok(clients) = fs::read_dir(dir) else {
        eprintln!("no captured frames at {}", dir.display());
        return frames;
    };
    let mut client_dirs: Vec<PathBuf> =
        clients.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect();
    client_dirs.sort();
    for client_dir in client_dirs {
        let mut files: Vec<PathBuf> =
            fs::read_dir(&client_dir).into_iter().flatten().filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for path in files {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let Some((api, version, direction)) = parse_captured_name(name) else { continue };
            let Some(api_key) = api_key_named(api) else { continue };
            frames.push((path.clone(), api_key, version, direction.to_owned()));
        }
    }
    frames
}

fn sample_batches() -> Vec<(String, Bytes)> {
    let mut batches = Vec::new();
    let headers = [NewHeader { key: b"trace-id", value: Some(b"abc123") }, NewHeader { key: b"empty", value: None }];
    let text = b"the quick brown fox jumps over the lazy dog ".repeat(8);
    for codec in Compression::ALL {
        // Plain, with keys, nulls and headers.
        let mut builder = RecordBatchBuilder::new(codec).with_base_offset(100).with_partition_leader_epoch(3);
        builder
            .append(&NewRecord { timestamp_ms: 1_700_000_000_000, key: Some(b"k1"), value: Some(b"v1"), headers: &[] })
            .unwrap();
        builder
            .append(&NewRecord { timestamp_ms: 1_700_000_000_005, key: None, value: Some(&text), headers: &headers })
            .unwrap();
        builder
            .append(&NewRecord { timestamp_ms: 1_699_999_999_000, key: Some(b""), value: None, headers: &[] })
            .unwrap();
        batches.push((format!("plain-{codec}"), builder.build().unwrap().into_bytes()));

        // Idempotent, transactional, with an offset gap (as after compaction).
        let mut builder =
            RecordBatchBuilder::new(codec).with_producer(4000, 2, 17).with_transactional(true).with_base_offset(7);
        builder
            .append_with_offset(7, &NewRecord { timestamp_ms: 5, key: Some(b"a"), value: Some(b"1"), headers: &[] })
            .unwrap();
        builder
            .append_with_offset(
                9,
                &NewRecord { timestamp_ms: 6, key: Some(b"b"), value: Some(b"2"), headers: &headers },
            )
            .unwrap();
        batches.push((format!("txn-{codec}"), builder.build().unwrap().into_bytes()));

        // LogAppendTime, and a compacted batch with a delete horizon.
        let mut builder = RecordBatchBuilder::new(codec).with_log_append_time(1_800_000_000_000);
        builder.append(&NewRecord { timestamp_ms: 10, key: Some(b"x"), value: Some(b"y"), headers: &[] }).unwrap();
        batches.push((format!("log-append-time-{codec}"), builder.build().unwrap().into_bytes()));
        let mut builder = RecordBatchBuilder::new(codec).with_delete_horizon_ms(1_750_000_000_000);
        builder
            .append(&NewRecord { timestamp_ms: 1_750_000_000_100, key: Some(b"tomb"), value: None, headers: &[] })
            .unwrap();
        batches.push((format!("delete-horizon-{codec}"), builder.build().unwrap().into_bytes()));
    }
    // A transaction marker: a control batch whose record key is (version 0, type 1 = COMMIT)
    // and whose value is (version 0, coordinator epoch 5).
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .with_producer(4000, 2, -1)
        .with_transactional(true)
        .with_control(true);
    builder
        .append(&NewRecord {
            timestamp_ms: 20,
            key: Some(&[0, 0, 0, 1]),
            value: Some(&[0, 0, 0, 0, 0, 5]),
            headers: &[],
        })
        .unwrap();
    batches.push(("commit-marker".to_owned(), builder.build().unwrap().into_bytes()));
    // An empty batch (Kafka writes these after compaction removes every record).
    batches.push(("empty".to_owned(), RecordBatchBuilder::new(Compression::None).build().unwrap().into_bytes()));
    batches
}

fn main() {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1);
    let captured_dir =
        args.next().map(PathBuf::from).unwrap_or_else(|| fuzz_dir.join("../crates/protocol/tests/corpus"));
    let out_dir = args.next().map(PathBuf::from).unwrap_or_else(|| fuzz_dir.join("corpus"));

    let mut requests = Corpus::new(&out_dir, "request");
    let mut responses = Corpus::new(&out_dir, "response");
    let mut record_batches = Corpus::new(&out_dir, "record_batch");
    let mut compressed = Corpus::new(&out_dir, "decompress");

    // Captured frames, and the record batches inside them.
    let mut found_batches: Vec<(String, Bytes)> = Vec::new();
    for (path, api_key, version, direction) in captured_frames(&captured_dir) {
        let raw = Bytes::from(fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display())));
        let client = path.parent().and_then(|p| p.file_name()).and_then(|n| n.to_str()).unwrap_or("captured");
        let name = format!("{client}-{}", path.file_name().unwrap().to_string_lossy());
        match direction.as_str() {
            "request" => {
                requests.add(&name, &raw);
                if let Ok(frame) = RequestFrame::parse(raw.clone()) {
                    if let Ok(RequestBody::Produce(produce)) = frame.decode_body() {
                        found_batches.extend(produce_batches(&produce).into_iter().map(|b| (name.clone(), b)));
                    }
                }
            }
            "response" => {
                let mut body = raw.clone();
                if parse_response_header(api_key, version, &mut body).is_err() {
                    continue;
                }
                responses.add(&name, &[&response_selector(api_key, version)[..], &body].concat());
                if api_key == ApiKey::Fetch {
                    if let Ok(fetch) = FetchResponse::decode(&mut body.clone(), version) {
                        found_batches.extend(fetch_batches(&fetch).into_iter().map(|b| (name.clone(), b)));
                    }
                }
            }
            _ => {}
        }
    }

    // A minimal body for every API and version that has one.
    for info in API_TABLE {
        for version in info.min_version..=info.max_version {
            for filler in filler_bodies() {
                if let Ok(body) = RequestBody::decode(info.key, version, &mut filler.clone()) {
                    let header = RequestHeader {
                        request_api_key: info.key as i16,
                        request_api_version: version,
                        correlation_id: 1,
                        client_id: Some("seed".to_owned()),
                        ..Default::default()
                    };
                    let mut frame = BytesMut::new();
                    let encoded = header.encode(&mut frame, info.request_header_version(version)).is_ok()
                        && body.encode(&mut frame, version).is_ok();
                    if encoded {
                        requests.add(&format!("synth-{}-v{version}", info.name), &frame);
                    }
                }
                if let Ok(body) = ResponseBody::decode(info.key, version, &mut filler.clone()) {
                    let mut encoded = BytesMut::new();
                    if body.encode(&mut encoded, version).is_ok() {
                        let seed = [&response_selector(info.key, version)[..], &encoded].concat();
                        responses.add(&format!("synth-{}-v{version}", info.name), &seed);
                    }
                }
            }
        }
    }

    // Record batches: flag byte 0 keeps the CRC as is, 1 recomputes it.
    let samples = sample_batches();
    for (name, batch) in samples.iter().chain(&found_batches) {
        record_batches.add(name, &[&[0u8][..], batch].concat());
        record_batches.add(name, &[&[1u8][..], batch].concat());
    }
    let two: Vec<u8> = samples.iter().take(2).flat_map(|(_, b)| b.to_vec()).collect();
    record_batches.add("two-batches", &[&[0u8][..], &two].concat());

    // Compressed data: the records sections of the sample batches, and text.
    let text = b"Kafka-compatible broker, Kafka-compatible broker, records records records".repeat(20);
    let mut plain: Vec<Vec<u8>> = samples.iter().map(|(_, b)| b[61..].to_vec()).collect();
    plain.push(text);
    plain.push(Vec::new());
    for codec in Compression::ALL {
        for data in &plain {
            let mut out = vec![codec.id()];
            compress(codec, data, &mut out).unwrap();
            compressed.add(&format!("{codec}"), &out);
            // Round-trip mode seeds (bit 7).
            compressed.add(&format!("roundtrip-{codec}"), &[&[0x80 | codec.id()][..], data].concat());
        }
    }
    // LZ4 frames with the flags other writers set (block and content
    // checksums, content size, linked blocks), stored and compressed blocks.
    for (name, frame) in lz4_frames(&plain) {
        compressed.add(&name, &[&[Compression::Lz4.id()][..], &frame].concat());
    }

    let mut coordinator = Corpus::new(&out_dir, "coordinator_load");
    for (name, seed) in coordinator_seeds() {
        coordinator.add(&name, &seed);
    }

    let mut sasl = Corpus::new(&out_dir, "sasl_server");
    for (name, seed) in sasl_seeds() {
        sasl.add(&name, &seed);
    }

    let mut x509 = Corpus::new(&out_dir, "x509_subject");
    for (name, seed) in x509_seeds() {
        x509.add(&name, &seed);
    }

    for corpus in [&requests, &responses, &record_batches, &compressed, &coordinator, &sasl, &x509] {
        println!("{}: {} seeds", corpus.dir.display(), corpus.written.len());
    }
}

/// `coordinator_load` seeds: records of both internal topics as the
/// coordinators write them (flag byte, then u16 key length, key, u16 value
/// length or 0xFFFF, value), plain and transactional.
fn coordinator_seeds() -> Vec<(String, Vec<u8>)> {
    use krabka_coordinator::group::records::CoordinatorRecord;
    use krabka_coordinator::txn::records::{partitions_schema, TxnRecord};
    use krabka_protocol::{GroupMetadataValue, OffsetCommitValue, TransactionLogValue};

    let frame = |records: &[(Bytes, Option<Bytes>)]| -> Vec<u8> {
        let mut out = Vec::new();
        for (key, value) in records {
            out.extend_from_slice(&(key.len() as u16).to_be_bytes());
            out.extend_from_slice(key);
            match value {
                Some(value) => {
                    out.extend_from_slice(&(value.len() as u16).to_be_bytes());
                    out.extend_from_slice(value);
                }
                None => out.extend_from_slice(&u16::MAX.to_be_bytes()),
            }
        }
        out
    };
    let partitions = [("t".to_string(), 0), ("t".to_string(), 2), ("u".to_string(), 1)].into_iter().collect();
    let mut txn = Vec::new();
    for (status, id) in [(1, "ongoing"), (2, "prepare-commit"), (4, "complete-commit"), (3, "prepare-abort")] {
        let value = TransactionLogValue {
            producer_id: 7,
            producer_epoch: 3,
            transaction_timeout_ms: 60_000,
            transaction_status: status,
            transaction_partitions: Some(partitions_schema(&partitions)),
            transaction_last_update_timestamp_ms: 1_000,
            transaction_start_timestamp_ms: 900,
            ..Default::default()
        };
        for version in [0, 1] {
            txn.push(TxnRecord { transactional_id: id.into(), value: Some(value.clone()) }.encode(version));
        }
    }
    txn.push(TxnRecord { transactional_id: "complete-commit".into(), value: None }.encode(0));
    let offset = OffsetCommitValue {
        offset: 42,
        leader_epoch: 3,
        metadata: "m".into(),
        commit_timestamp: 1_000,
        ..Default::default()
    };
    let member = |id: &str| krabka_protocol::group_metadata_value::MemberMetadata {
        member_id: id.into(),
        group_instance_id: Some(format!("instance-{id}")),
        session_timeout: 45_000,
        subscription: Bytes::from_static(b"\0\x01\0\0\0\x01\0\x01t"),
        ..Default::default()
    };
    let group = GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 2,
        protocol: Some("cooperative-sticky".into()),
        leader: Some("a".into()),
        members: vec![member("a"), member("b")],
        ..Default::default()
    };
    let groups = vec![
        CoordinatorRecord::Group { group: "g".into(), value: Some(group) }.encode(),
        CoordinatorRecord::offset("g", "t", 0, Some(offset.clone())).encode(),
        CoordinatorRecord::offset("g", "t", 1, Some(offset)).encode(),
        CoordinatorRecord::offset("g", "t", 1, None).encode(),
    ];
    vec![
        ("txn".into(), [&[0u8][..], &frame(&txn)].concat()),
        ("groups".into(), [&[1u8][..], &frame(&groups)].concat()),
        ("groups-txn-commit".into(), [&[1u8 | 2 | 4][..], &frame(&groups)].concat()),
        ("groups-txn-abort".into(), [&[1u8 | 2 | 8][..], &frame(&groups)].concat()),
    ]
}

fn produce_batches(produce: &ProduceRequest) -> Vec<Bytes> {
    let mut out = Vec::new();
    for topic in &produce.topic_data {
        for partition in &topic.partition_data {
            out.extend(partition.records.iter().filter(|r| !r.is_empty()).cloned());
        }
    }
    out
}

fn fetch_batches(fetch: &FetchResponse) -> Vec<Bytes> {
    let mut out = Vec::new();
    for topic in &fetch.responses {
        for partition in &topic.partitions {
            out.extend(partition.records.iter().filter(|r| !r.is_empty()).cloned());
        }
    }
    out
}

/// `sasl_server` seeds: whole exchanges that succeed (PLAIN; SCRAM's
/// client-first and client-final for the target's user, salt and server
/// nonce, tokens split by 0xFF), and JAAS texts.
fn sasl_seeds() -> Vec<(String, Vec<u8>)> {
    use krabka_security::{InMemoryCredentials, SaslClient, SaslMechanism, SaslServer, ScramCredential};
    let mut seeds = vec![("plain".to_owned(), [&[0u8][..], b"\0alice\0alice-secret"].concat())];
    for (mode, mechanism) in [(1u8, SaslMechanism::ScramSha256), (2, SaslMechanism::ScramSha512)] {
        let scram = mechanism.scram().unwrap();
        let mut credentials = InMemoryCredentials::new();
        let credential = ScramCredential::from_password(scram, "alice-secret", b"fuzz-salt".to_vec(), 4096);
        credentials.add_scram_credential("alice", credential);
        let mut client = SaslClient::new(mechanism, "alice", "alice-secret", "fuzzClientNonce".into());
        let mut server = SaslServer::new(mechanism, "fuzzServerNonce".into());
        let first = client.initial_token();
        let krabka_security::SaslStep::Challenge(challenge) = server.evaluate(&first, &credentials).unwrap() else {
            panic!("SCRAM answers the client-first message with a challenge")
        };
        let last = client.evaluate(&challenge).unwrap().unwrap();
        seeds.push((mechanism.name().to_owned(), [&[mode][..], &first, &[0xFF], &last].concat()));
    }
    let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a b=c;" user_admin="x";"#;
    seeds.push(("jaas".to_owned(), [&[3u8][..], jaas.as_bytes()].concat()));
    seeds
}

/// `x509_subject` seeds: certificates (mode 0) made with `openssl req
/// -x509` (Ed25519 keys), and mapping rules with a name (mode 1, 0xFF
/// between them).
fn x509_seeds() -> Vec<(String, Vec<u8>)> {
    let certificates = [
        (
            "simple",
            concat!(
                "3082015130820103a003020102020107300506032b6570303a310b3009060355040613025553310d300b060355040a0c",
                "0441636d65310c300a060355040b0c03656e67310e300c06035504030c05616c6963653020170d323631323034313633",
                "3432375a180f32313236313131303136333432375a303a310b3009060355040613025553310d300b060355040a0c0441",
                "636d65310c300a060355040b0c03656e67310e300c06035504030c05616c696365302a300506032b6570032100162a11",
                "1bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d1304023000301d0603",
                "551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b6570034100eb4c3d37e89d1416e774c7",
                "da1e1f26bc8de01dfca2091441ffe660838f1a765be912975a0b3ac6a620bf4cfd66711dc1e5acc482cc6dcb4702df01",
                "bddc91310a",
            ),
        ),
        (
            "email",
            concat!(
                "3082015730820109a003020102020107300506032b6570303d310d300b060355040a0c0441636d65310c300a06035504",
                "030c03626f62311e301c06092a864886f70d010901160f626f62406578616d706c652e636f6d3020170d323631323034",
                "3136333432375a180f32313236313131303136333432375a303d310d300b060355040a0c0441636d65310c300a060355",
                "04030c03626f62311e301c06092a864886f70d010901160f626f62406578616d706c652e636f6d302a300506032b6570",
                "032100162a111bbf45c38d4bba0ba3670f5e819470179d699fae343849bf7cdb806e78a32c302a30090603551d130402",
                "3000301d0603551d0e041604144985cf7cc9fd6de23ac4b86cf9e68c43f334ad28300506032b6570034100b50ac2d125",
                "919d5d7f433f30eb4a7c85f12210f4ed8d3535804693f9f711ac43cabe4eab5814535094df78a3a596196d91e6e16e63",
                "c9f65cfffc7971da573b08",
            ),
        ),
    ];
    let hex = |text: &str| -> Vec<u8> {
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
    };
    let mut seeds: Vec<(String, Vec<u8>)> =
        certificates.iter().map(|(name, der)| (name.to_string(), [&[0u8][..], &hex(der)].concat())).collect();
    let rules = [
        (
            "kafka-docs",
            concat!(
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, ",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, DEFAULT",
            ),
            "CN=Duke,OU=ServiceUsers,O=Org,C=US",
        ),
        ("escapes", r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT", r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz"),
        ("back-references", "RULE:^CN=(.*?),OU=(.*?)$/$12-$3-${g}$0/U", "CN=a,OU=b"),
        ("lazy", "  RULE:(.*?)/x/ ,,DEFAULT\n", "ab"),
    ];
    for (name, rules, dn) in rules {
        seeds.push((format!("rules-{name}"), [&[1u8][..], rules.as_bytes(), &[0xFF], dn.as_bytes()].concat()));
    }
    seeds
}

/// `plain`'s data (and 300 bytes of one value, to have a stored block) as
/// LZ4 frames with each flag combination lz4_flex writes.
fn lz4_frames(plain: &[Vec<u8>]) -> Vec<(String, Vec<u8>)> {
    use lz4_flex::frame::{BlockMode, FrameEncoder, FrameInfo};
    use std::io::Write;
    let stored: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let mut frames = Vec::new();
    for (index, data) in plain.iter().chain([&stored]).enumerate() {
        for (mode, block_mode) in [("independent", BlockMode::Independent), ("linked", BlockMode::Linked)] {
            for checksums in [false, true] {
                let info = FrameInfo::new()
                    .block_mode(block_mode)
                    .block_checksums(checksums)
                    .content_checksum(checksums)
                    .content_size(checksums.then_some(data.len() as u64));
                let mut encoder = FrameEncoder::with_frame_info(info, Vec::new());
                encoder.write_all(data).unwrap();
                let frame = encoder.finish().unwrap();
                frames.push((format!("lz4-{index}-{mode}-checksums-{checksums}"), frame));
            }
        }
    }
    frames
}
