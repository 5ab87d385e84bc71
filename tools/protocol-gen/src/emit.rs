//! Writes Rust for one spec: a struct per message and nested struct, covering
//! every version (fields gated by version checks), with decode, encode, a
//! `Default` that honours the spec's defaults, and (for tests) a generator of
//! random values valid at a given version.

use std::fmt::Write;

use anyhow::bail;

use crate::spec::{Field, Spec, Struct, Ty, Versions};

/// Names the generated code must not shadow.
const RESERVED_TYPE_NAMES: &[&str] =
    &["Option", "Result", "Vec", "String", "Bytes", "BytesMut", "Uuid", "Box", "Default"];
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn",
    "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static",
    "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do",
    "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// `ProduceRequest` -> `produce_request`, `ISRNodes` -> `isr_nodes`.
pub fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower = i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

pub fn field_ident(name: &str) -> String {
    let snake = snake_case(name);
    if RUST_KEYWORDS.contains(&snake.as_str()) {
        format!("r#{snake}")
    } else {
        snake
    }
}

/// How a version range reads as a condition on `version`, within `valid`.
enum Cond {
    Always,
    Never,
    When(String),
}

fn cond(range: Versions, valid: Versions) -> Cond {
    let r = range.intersect(valid);
    if r.is_empty() {
        Cond::Never
    } else if r == valid {
        Cond::Always
    } else if r.min <= valid.min {
        Cond::When(format!("version <= {}", r.max))
    } else if r.max >= valid.max {
        Cond::When(format!("version >= {}", r.min))
    } else {
        Cond::When(format!("({}..={}).contains(&version)", r.min, r.max))
    }
}

fn cond_expr(range: Versions, valid: Versions) -> String {
    match cond(range, valid) {
        Cond::Always => "true".into(),
        Cond::Never => "false".into(),
        Cond::When(c) => c,
    }
}

fn rust_scalar(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::Int8 => "i8".into(),
        Ty::Int16 => "i16".into(),
        Ty::Uint16 => "u16".into(),
        Ty::Int32 => "i32".into(),
        Ty::Uint32 => "u32".into(),
        Ty::Int64 => "i64".into(),
        Ty::Float64 => "f64".into(),
        Ty::String => "String".into(),
        Ty::Bytes | Ty::Records => "Bytes".into(),
        Ty::Uuid => "Uuid".into(),
        Ty::Array(inner) => format!("Vec<{}>", rust_scalar(inner)),
        Ty::Struct(name) => name.clone(),
    }
}

fn rust_type(field: &Field) -> String {
    if field.is_option() {
        format!("Option<{}>", rust_scalar(&field.ty))
    } else {
        rust_scalar(&field.ty)
    }
}

fn int_literal(ty: &Ty, text: &str) -> anyhow::Result<String> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let value: i128 = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(hex) => i128::from_str_radix(hex, 16)?,
        None => digits.parse()?,
    };
    let value = if negative { -value } else { value };
    let suffix = rust_scalar(ty);
    let fits = match ty {
        Ty::Int8 => i8::try_from(value).is_ok(),
        Ty::Int16 => i16::try_from(value).is_ok(),
        Ty::Uint16 => u16::try_from(value).is_ok(),
        Ty::Int32 => i32::try_from(value).is_ok(),
        Ty::Uint32 => u32::try_from(value).is_ok(),
        Ty::Int64 => i64::try_from(value).is_ok(),
        _ => false,
    };
    if !fits {
        bail!("default {text} does not fit {suffix}");
    }
    Ok(format!("{value}{suffix}"))
}

/// The Rust expression for a field's default, as Kafka's generator defines it.
fn default_expr(field: &Field) -> anyhow::Result<String> {
    let spec_default = field.default.as_deref();
    let plain = match &field.ty {
        Ty::Bool => match spec_default {
            Some("true") | Some("True") => "true".into(),
            None | Some("false") | Some("False") => "false".into(),
            Some(other) => bail!("bad bool default {other}"),
        },
        Ty::Int8 | Ty::Int16 | Ty::Uint16 | Ty::Int32 | Ty::Uint32 | Ty::Int64 => {
            int_literal(&field.ty, spec_default.unwrap_or("0"))?
        }
        Ty::Float64 => {
            let value: f64 = spec_default.unwrap_or("0").parse()?;
            format!("{value:?}f64")
        }
        Ty::String => match spec_default {
            None | Some("") | Some("null") | Some("None") => "String::new()".into(),
            Some(text) => format!("String::from({text:?})"),
        },
        Ty::Bytes | Ty::Records => "Bytes::new()".into(),
        Ty::Uuid => "Uuid::ZERO".into(),
        Ty::Array(_) => "Vec::new()".into(),
        Ty::Struct(name) => format!("{name}::default()"),
    };
    if field.is_option() {
        // Records fields default to null in Kafka even without a spec default.
        if field.default_is_null() || field.ty == Ty::Records {
            return Ok("None".into());
        }
        return Ok(format!("Some({plain})"));
    }
    if field.default_is_null() && !field.ty.can_be_null() {
        bail!("field {} defaults to null but cannot be null", field.name);
    }
    Ok(plain)
}

/// A condition that holds when `self.<ident>` differs from the field's default.
fn differs_from_default(field: &Field, ident: &str) -> anyhow::Result<String> {
    let default = default_expr(field)?;
    Ok(match (&field.ty, field.is_option(), default.as_str()) {
        (Ty::Array(_), false, _) => format!("!self.{ident}.is_empty()"),
        (Ty::String, false, "String::new()") => format!("!self.{ident}.is_empty()"),
        (Ty::Bytes | Ty::Records, false, _) => format!("!self.{ident}.is_empty()"),
        (_, true, "None") => format!("self.{ident}.is_some()"),
        (Ty::Array(_) | Ty::String | Ty::Bytes | Ty::Records, true, _) => {
            format!("self.{ident}.as_ref().is_none_or(|value| !value.is_empty())")
        }
        _ => format!("self.{ident} != {default}"),
    })
}

/// An expression that reads one non-null value of `ty` from `buf`.
fn decode_value(ty: &Ty, compact: &str, field: &str) -> String {
    match ty {
        Ty::Bool => "get_bool(buf)?".into(),
        Ty::Int8 => "get_i8(buf)?".into(),
        Ty::Int16 => "get_i16(buf)?".into(),
        Ty::Uint16 => "get_u16(buf)?".into(),
        Ty::Int32 => "get_i32(buf)?".into(),
        Ty::Uint32 => "get_u32(buf)?".into(),
        Ty::Int64 => "get_i64(buf)?".into(),
        Ty::Float64 => "get_f64(buf)?".into(),
        Ty::String => format!("get_string(buf, {compact}, {field:?})?"),
        Ty::Bytes | Ty::Records => format!("get_bytes(buf, {compact}, {field:?})?"),
        Ty::Uuid => "get_uuid(buf)?".into(),
        Ty::Struct(name) => format!("{name}::decode_body(buf, version)?"),
        Ty::Array(inner) => format!("get_array(buf, {compact}, {field:?}, {})?", element_reader(inner, compact, field)),
    }
}

fn element_reader(ty: &Ty, compact: &str, field: &str) -> String {
    match ty {
        Ty::Bool => "get_bool".into(),
        Ty::Int8 => "get_i8".into(),
        Ty::Int16 => "get_i16".into(),
        Ty::Uint16 => "get_u16".into(),
        Ty::Int32 => "get_i32".into(),
        Ty::Uint32 => "get_u32".into(),
        Ty::Int64 => "get_i64".into(),
        Ty::Float64 => "get_f64".into(),
        Ty::Uuid => "get_uuid".into(),
        Ty::Struct(name) => format!("|buf| {name}::decode_body(buf, version)"),
        other => format!("|buf| Ok({})", decode_value(other, compact, field)),
    }
}

/// An expression that reads a possibly-null value (the Rust type is Option).
fn decode_nullable(ty: &Ty, compact: &str, field: &str) -> String {
    match ty {
        Ty::String => format!("get_nullable_string(buf, {compact})?"),
        Ty::Bytes | Ty::Records => format!("get_nullable_bytes(buf, {compact})?"),
        Ty::Array(inner) => format!("get_nullable_array(buf, {compact}, {})?", element_reader(inner, compact, field)),
        Ty::Struct(name) => {
            format!("if get_i8(buf)? < 0 {{ None }} else {{ Some({name}::decode_body(buf, version)?) }}")
        }
        _ => unreachable!("only nullable kinds reach here"),
    }
}

/// Statements that write one non-null value; `value` is an expression of type `&T`.
fn encode_value(ty: &Ty, value: &str, compact: &str) -> String {
    // Scalars are written by value: `&self.x` becomes `self.x`, `item` becomes `*item`.
    let scalar = match value.strip_prefix('&') {
        Some(place) => place.to_string(),
        None => format!("*{value}"),
    };
    let value_ref = value;
    match ty {
        Ty::Bool => format!("put_bool(buf, {scalar});"),
        Ty::Int8 => format!("buf.put_i8({scalar});"),
        Ty::Int16 => format!("buf.put_i16({scalar});"),
        Ty::Uint16 => format!("buf.put_u16({scalar});"),
        Ty::Int32 => format!("buf.put_i32({scalar});"),
        Ty::Uint32 => format!("buf.put_u32({scalar});"),
        Ty::Int64 => format!("buf.put_i64({scalar});"),
        Ty::Float64 => format!("buf.put_f64({scalar});"),
        Ty::String => format!("put_string(buf, {value_ref}, {compact})?;"),
        Ty::Bytes | Ty::Records => format!("put_bytes(buf, {value_ref}, {compact})?;"),
        Ty::Uuid => format!("put_uuid(buf, {value_ref});"),
        Ty::Struct(_) => format!("{}.encode_body(buf, version)?;", value_ref.trim_start_matches('&')),
        Ty::Array(inner) => format!("put_array(buf, {value_ref}, {compact}, {})?;", element_writer(inner, compact)),
    }
}

fn element_writer(ty: &Ty, compact: &str) -> String {
    match ty {
        Ty::Struct(_) => "|buf, item| item.encode_body(buf, version)".into(),
        other => format!("|buf, item| {{ {} Ok(()) }}", encode_value(other, "item", compact)),
    }
}

fn encode_nullable(ty: &Ty, value: &str, compact: &str) -> String {
    match ty {
        Ty::String => format!("put_nullable_string(buf, {value}.as_deref(), {compact})?;"),
        Ty::Bytes | Ty::Records => format!("put_nullable_bytes(buf, {value}.as_deref(), {compact})?;"),
        Ty::Array(inner) => {
            format!("put_nullable_array(buf, {value}.as_deref(), {compact}, {})?;", element_writer(inner, compact))
        }
        Ty::Struct(_) => format!(
            "match &{value} {{ None => buf.put_i8(-1), Some(item) => {{ buf.put_i8(1); item.encode_body(buf, version)?; }} }}"
        ),
        _ => unreachable!("only nullable kinds reach here"),
    }
}

fn random_value(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "rng.bool()".into(),
        Ty::Int8 => "rng.next_u64() as i8".into(),
        Ty::Int16 => "rng.next_u64() as i16".into(),
        Ty::Uint16 => "rng.next_u64() as u16".into(),
        Ty::Int32 => "rng.next_u64() as i32".into(),
        Ty::Uint32 => "rng.next_u64() as u32".into(),
        Ty::Int64 => "rng.next_u64() as i64".into(),
        Ty::Float64 => "rng.f64()".into(),
        Ty::String => "rng.string()".into(),
        Ty::Bytes | Ty::Records => "rng.bytes()".into(),
        Ty::Uuid => "rng.uuid()".into(),
        Ty::Struct(name) => format!("{name}::random(rng, version)"),
        Ty::Array(inner) => format!("(0..rng.below(3)).map(|_| {}).collect()", random_value(inner)),
    }
}

/// The generated decode and encode bodies of one struct, built field by field.
#[derive(Default)]
struct CodecBodies {
    dec: String,
    enc: String,
    /// Match arms of the tagged fields the decoder knows.
    tagged_dec: String,
    /// Writes of the tagged fields set to other than their default.
    tagged_enc: String,
}

impl CodecBodies {
    /// The tagged-fields section that closes both bodies in flexible versions.
    fn emit_tagged_section(&mut self) -> std::fmt::Result {
        let (dec, enc) = (&mut self.dec, &mut self.enc);
        writeln!(dec, "        if flexible {{")?;
        writeln!(dec, "            let mut unknown = Vec::new();")?;
        if self.tagged_dec.is_empty() {
            writeln!(dec, "            get_tagged_fields(buf, &mut unknown, |_, _| Ok(false))?;")?;
        } else {
            writeln!(dec, "            get_tagged_fields(buf, &mut unknown, |tag, buf| match tag {{")?;
            dec.push_str(&self.tagged_dec);
            writeln!(dec, "                _ => Ok(false),")?;
            writeln!(dec, "            }})?;")?;
        }
        writeln!(dec, "            this.unknown_tagged_fields = unknown;")?;
        writeln!(dec, "        }}")?;
        writeln!(enc, "        if flexible {{")?;
        if self.tagged_enc.is_empty() {
            writeln!(enc, "            put_tagged_fields(buf, Vec::new(), &self.unknown_tagged_fields)?;")?;
        } else {
            writeln!(enc, "            let mut tagged = Vec::new();")?;
            enc.push_str(&self.tagged_enc);
            writeln!(enc, "            put_tagged_fields(buf, tagged, &self.unknown_tagged_fields)?;")?;
        }
        writeln!(enc, "        }}")?;
        Ok(())
    }
}

/// The expressions that read and write a regular (untagged) field, null
/// checked in the versions where it is nullable.
fn read_and_write(f: &Field, ident: &str, compact: &str, nullable: Cond) -> (String, String) {
    if !f.is_option() {
        return (decode_value(&f.ty, compact, &f.name), encode_value(&f.ty, &format!("&self.{ident}"), compact));
    }
    let null_read = decode_nullable(&f.ty, compact, &f.name);
    let null_write = encode_nullable(&f.ty, &format!("self.{ident}"), compact);
    let plain_read = format!("Some({})", decode_value(&f.ty, compact, &f.name));
    let plain_write = format!(
        "let value = self.{ident}.as_ref().ok_or(EncodeError::UnexpectedNull({:?}))?; {}",
        f.name,
        encode_value(&f.ty, "value", compact)
    );
    match &nullable {
        Cond::Always => (null_read, null_write),
        Cond::Never => (plain_read, plain_write),
        Cond::When(c) => (
            format!("if {c} {{ {null_read} }} else {{ {plain_read} }}"),
            format!("if {c} {{ {null_write} }} else {{ {plain_write} }}"),
        ),
    }
}

struct StructEmitter<'a> {
    spec: &'a Spec,
    out: String,
}

impl StructEmitter<'_> {
    fn is_flexible_somewhere(&self) -> bool {
        !self.spec.flexible.intersect(self.spec.valid).is_empty()
    }

    /// The compact-encoding flag for a field: a local `flexible`, or `false`.
    fn compact_of(&self, field: &Field) -> &'static str {
        if field.compact_allowed && self.is_flexible_somewhere() {
            "flexible"
        } else {
            "false"
        }
    }

    /// Whether the field sits in the regular (untagged) sequence at some version.
    fn regular(&self, field: &Field) -> anyhow::Result<bool> {
        let Some((_, tagged)) = field.tagged else { return Ok(true) };
        let valid = self.spec.valid;
        if tagged.intersect(valid) != field.versions.intersect(valid) {
            bail!("{}.{}: taggedVersions differ from versions", self.spec.name, field.name);
        }
        Ok(false)
    }

    fn emit(&mut self, st: &Struct, top_level: bool) -> anyhow::Result<()> {
        if RESERVED_TYPE_NAMES.contains(&st.name.as_str()) {
            bail!("struct name {} would shadow a Rust type", st.name);
        }
        let valid = self.spec.valid;
        let has_float = st.fields.iter().any(|f| matches!(f.ty, Ty::Float64));
        let o = &mut self.out;
        if top_level {
            writeln!(o, "/// `{}` ({}), versions {}-{}.", st.name, self.spec.kind, valid.min, valid.max)?;
        }
        let derives = "Clone, Debug, PartialEq";
        let _ = has_float;
        writeln!(o, "#[derive({derives})]")?;
        writeln!(o, "pub struct {} {{", st.name)?;
        for f in &st.fields {
            let about = f.about.replace('\n', " ");
            let about = about.trim();
            if !about.is_empty() {
                writeln!(o, "    /// {about}")?;
            }
            writeln!(o, "    pub {}: {},", field_ident(&f.name), rust_type(f))?;
        }
        writeln!(o, "    /// Tagged fields unknown to this version of krabka, kept to be written back.")?;
        writeln!(o, "    pub unknown_tagged_fields: Vec<RawTaggedField>,")?;
        writeln!(o, "}}\n")?;

        // Default
        writeln!(o, "impl Default for {} {{", st.name)?;
        writeln!(o, "    fn default() -> Self {{")?;
        writeln!(o, "        Self {{")?;
        for f in &st.fields {
            writeln!(o, "            {}: {},", field_ident(&f.name), default_expr(f)?)?;
        }
        writeln!(o, "            unknown_tagged_fields: Vec::new(),")?;
        writeln!(o, "        }}\n    }}\n}}\n")?;

        self.emit_codec(st)?;
        self.emit_random(st)?;
        Ok(())
    }

    fn emit_codec(&mut self, st: &Struct) -> anyhow::Result<()> {
        let valid = self.spec.valid;
        let mut bodies = CodecBodies::default();
        let flexible_expr = cond_expr(self.spec.flexible, valid);
        if self.is_flexible_somewhere() {
            writeln!(bodies.dec, "        let flexible = {flexible_expr};")?;
            writeln!(bodies.enc, "        let flexible = {flexible_expr};")?;
        }
        writeln!(bodies.dec, "        let mut this = Self::default();")?;
        for f in &st.fields {
            self.emit_field_codec(f, &mut bodies)?;
        }
        if !matches!(cond(self.spec.flexible, valid), Cond::Never) {
            bodies.emit_tagged_section()?;
        }
        writeln!(bodies.dec, "        Ok(this)")?;
        writeln!(bodies.enc, "        Ok(())")?;

        let o = &mut self.out;
        writeln!(o, "impl {} {{", st.name)?;
        writeln!(o, "    /// Reads the struct's fields as of `version` (already checked by the caller).")?;
        writeln!(o, "    pub fn decode_body(buf: &mut Bytes, version: i16) -> DecodeResult<Self> {{")?;
        o.push_str(&bodies.dec);
        writeln!(o, "    }}\n")?;
        writeln!(o, "    /// Writes the struct's fields as of `version` (already checked by the caller).")?;
        writeln!(o, "    pub fn encode_body(&self, buf: &mut BytesMut, version: i16) -> EncodeResult<()> {{")?;
        o.push_str(&bodies.enc);
        writeln!(o, "    }}\n}}\n")?;
        Ok(())
    }

    /// One field's lines in the decode and encode bodies (or their tagged sections).
    fn emit_field_codec(&self, f: &Field, bodies: &mut CodecBodies) -> anyhow::Result<()> {
        let valid = self.spec.valid;
        let ident = field_ident(&f.name);
        let compact = self.compact_of(f);
        let default = differs_from_default(f, &ident)?;
        // A response that carries a value its version has no field for
        // is a handler bug: debug builds (every test) refuse to encode
        // it, release builds drop the value, so that a valid request is
        // still answered rather than its connection closed.
        let refused =
            if self.spec.kind == "response" { format!("{default} && cfg!(debug_assertions)") } else { default.clone() };
        let presence = cond(f.versions, valid);
        let not_supported = format!(
            "return Err(EncodeError::FieldNotSupported {{ message: {:?}, field: {:?}, version }});",
            self.spec.name, f.name
        );
        if !self.regular(f)? {
            let (tag, tagged_versions) = f.tagged.expect("tagged");
            let tagged_cond = cond_expr(tagged_versions, valid);
            // Decode: tags arrive in the tagged section, in flexible versions only.
            let value = if f.is_option() {
                decode_nullable(&f.ty, "true", &f.name)
            } else {
                decode_value(&f.ty, "true", &f.name)
            };
            writeln!(
                bodies.tagged_dec,
                "                {tag} if {tagged_cond} => {{ this.{ident} = {value}; Ok(true) }}"
            )?;
            let write = if f.is_option() {
                encode_nullable(&f.ty, &format!("self.{ident}"), "true")
            } else {
                encode_value(&f.ty, &format!("&self.{ident}"), "true")
            };
            let tagged_enc = &mut bodies.tagged_enc;
            writeln!(tagged_enc, "            if {tagged_cond} && {default} {{")?;
            writeln!(tagged_enc, "                let mut data = BytesMut::new();")?;
            writeln!(tagged_enc, "                {{ let buf = &mut data; {write} }}")?;
            writeln!(tagged_enc, "                tagged.push(({tag}, data));")?;
            writeln!(tagged_enc, "            }}")?;
            if !f.ignorable {
                writeln!(bodies.enc, "        if !({tagged_cond}) && {refused} {{ {not_supported} }}")?;
            }
            return Ok(());
        }
        let (read, write) = read_and_write(f, &ident, compact, cond(f.nullable, valid));
        let (dec, enc) = (&mut bodies.dec, &mut bodies.enc);
        match presence {
            Cond::Always => {
                writeln!(dec, "        this.{ident} = {read};")?;
                writeln!(enc, "        {write}")?;
            }
            Cond::Never => {
                if !f.ignorable {
                    writeln!(enc, "        if {refused} {{ {not_supported} }}")?;
                }
            }
            Cond::When(c) => {
                writeln!(dec, "        if {c} {{ this.{ident} = {read}; }}")?;
                if f.ignorable {
                    writeln!(enc, "        if {c} {{ {write} }}")?;
                } else {
                    writeln!(enc, "        if {c} {{ {write} }} else if {refused} {{ {not_supported} }}")?;
                }
            }
        }
        Ok(())
    }

    fn emit_random(&mut self, st: &Struct) -> anyhow::Result<()> {
        let valid = self.spec.valid;
        let mut body = String::new();
        writeln!(body, "        let mut this = Self::default();")?;
        for f in &st.fields {
            let ident = field_ident(&f.name);
            let value = random_value(&f.ty);
            let value = if f.is_option() {
                match cond(f.nullable, valid) {
                    Cond::Always => format!("if rng.below(4) == 0 {{ None }} else {{ Some({value}) }}"),
                    Cond::Never => format!("Some({value})"),
                    Cond::When(c) => format!("if {c} && rng.below(4) == 0 {{ None }} else {{ Some({value}) }}"),
                }
            } else {
                value
            };
            match cond(f.versions, valid) {
                Cond::Always => writeln!(body, "        this.{ident} = {value};")?,
                Cond::Never => {}
                Cond::When(c) => writeln!(body, "        if {c} {{ this.{ident} = {value}; }}")?,
            }
        }
        if !matches!(cond(self.spec.flexible, valid), Cond::Never) {
            // One unknown tag above every known one, so decoding keeps its place.
            writeln!(
                body,
                "        if {} && rng.below(4) == 0 {{ this.unknown_tagged_fields.push(RawTaggedField {{ tag: 10_000 + rng.below(100) as u32, data: rng.bytes() }}); }}",
                cond_expr(self.spec.flexible, valid)
            )?;
        }
        writeln!(body, "        this")?;
        let o = &mut self.out;
        // Public under the `testing` feature: the broker's black-box tests and
        // wire fuzzer build requests from these too.
        writeln!(o, "#[cfg(any(test, feature = \"testing\"))]")?;
        writeln!(o, "impl {} {{", st.name)?;
        writeln!(o, "    /// A random value valid at `version` (tests and fuzzing only).")?;
        writeln!(o, "    pub fn random(rng: &mut crate::testing::Rng, version: i16) -> Self {{")?;
        o.push_str(&body);
        writeln!(o, "    }}\n}}\n")?;
        Ok(())
    }
}

/// The whole Rust file for one spec.
pub fn emit_spec(spec: &Spec) -> anyhow::Result<String> {
    let mut emitter = StructEmitter { spec, out: String::new() };
    writeln!(
        emitter.out,
        "// Generated by tools/protocol-gen from {}.json (Apache Kafka 4.3.1). Do not edit.\n",
        spec.name
    )?;
    writeln!(emitter.out, "use crate::generated::prelude::*;\n")?;
    for (i, st) in spec.structs.iter().enumerate() {
        emitter.emit(st, i == 0)?;
    }
    let name = &spec.name;
    let flexible_min = if spec.flexible.intersect(spec.valid).is_empty() {
        "None".to_string()
    } else {
        format!("Some({})", spec.flexible.min.max(spec.valid.min))
    };
    let o = &mut emitter.out;
    writeln!(o, "impl Message for {name} {{")?;
    writeln!(o, "    const NAME: &'static str = {name:?};")?;
    writeln!(o, "    const MIN_VERSION: i16 = {};", spec.valid.min)?;
    writeln!(o, "    const MAX_VERSION: i16 = {};", spec.valid.max)?;
    writeln!(o, "    const FLEXIBLE_MIN_VERSION: Option<i16> = {flexible_min};")?;
    writeln!(o, "    fn decode_body(buf: &mut Bytes, version: i16) -> DecodeResult<Self> {{")?;
    writeln!(o, "        {name}::decode_body(buf, version)")?;
    writeln!(o, "    }}")?;
    writeln!(o, "    fn encode_body(&self, buf: &mut BytesMut, version: i16) -> EncodeResult<()> {{")?;
    writeln!(o, "        {name}::encode_body(self, buf, version)")?;
    writeln!(o, "    }}")?;
    writeln!(o, "}}")?;
    Ok(emitter.out)
}
