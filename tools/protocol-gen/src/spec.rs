//! The JSON message-spec model: what Kafka's `*.json` files say, parsed into
//! types the emitter can walk. Kafka's files carry `//` comments, which JSON
//! does not allow; they are stripped first.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context};
use serde::Deserialize;

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct RawSpec {
    pub api_key: Option<i16>,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub valid_versions: String,
    pub flexible_versions: Option<String>,
    #[serde(default)]
    pub fields: Vec<RawField>,
    #[serde(default)]
    pub common_structs: Vec<RawStruct>,
    #[serde(default)]
    pub latest_version_unstable: bool,
    #[serde(default)]
    pub listeners: Vec<String>,
}

#[derive(Deserialize, Debug)]
pub struct RawStruct {
    pub name: String,
    #[serde(default)]
    pub fields: Vec<RawField>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct RawField {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: String,
    pub versions: Option<String>,
    pub nullable_versions: Option<String>,
    pub tagged_versions: Option<String>,
    pub tag: Option<u32>,
    pub default: Option<serde_json::Value>,
    #[serde(default)]
    pub ignorable: bool,
    pub flexible_versions: Option<String>,
    #[serde(default)]
    pub fields: Vec<RawField>,
    #[serde(default)]
    pub about: String,
}

/// An inclusive version range; empty when `min > max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions {
    pub min: i16,
    pub max: i16,
}

impl Versions {
    pub const NONE: Versions = Versions { min: 1, max: 0 };

    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let text = text.trim();
        if text == "none" {
            return Ok(Self::NONE);
        }
        if let Some(min) = text.strip_suffix('+') {
            return Ok(Versions { min: min.parse()?, max: i16::MAX });
        }
        if let Some((min, max)) = text.split_once('-') {
            return Ok(Versions { min: min.parse()?, max: max.parse()? });
        }
        let single = text.parse().with_context(|| format!("bad versions {text:?}"))?;
        Ok(Versions { min: single, max: single })
    }

    pub fn is_empty(self) -> bool {
        self.min > self.max
    }

    pub fn intersect(self, other: Versions) -> Versions {
        Versions { min: self.min.max(other.min), max: self.max.min(other.max) }
    }
}

/// A field's type.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Bool,
    Int8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Float64,
    String,
    Bytes,
    Records,
    Uuid,
    Array(Box<Ty>),
    Struct(String),
}

impl Ty {
    pub fn parse(text: &str) -> anyhow::Result<Ty> {
        Ok(match text {
            "bool" => Ty::Bool,
            "int8" => Ty::Int8,
            "int16" => Ty::Int16,
            "uint16" => Ty::Uint16,
            "int32" => Ty::Int32,
            "uint32" => Ty::Uint32,
            "int64" => Ty::Int64,
            "float64" => Ty::Float64,
            "string" => Ty::String,
            "bytes" => Ty::Bytes,
            "records" => Ty::Records,
            "uuid" => Ty::Uuid,
            _ => {
                if let Some(element) = text.strip_prefix("[]") {
                    Ty::Array(Box::new(Ty::parse(element)?))
                } else if text.starts_with(|c: char| c.is_ascii_uppercase()) {
                    Ty::Struct(text.to_string())
                } else {
                    bail!("unknown type {text:?}")
                }
            }
        })
    }

    /// Types whose Rust form can be `Option<..>` (Kafka's nullable kinds).
    pub fn can_be_null(&self) -> bool {
        matches!(self, Ty::String | Ty::Bytes | Ty::Records | Ty::Array(_) | Ty::Struct(_))
    }
}

/// A field, with its version ranges resolved against the message.
#[derive(Debug)]
pub struct Field {
    pub name: String,
    pub ty: Ty,
    pub versions: Versions,
    pub nullable: Versions,
    pub tagged: Option<(u32, Versions)>,
    pub ignorable: bool,
    /// False when the field opts out of compact encoding (`flexibleVersions: none`).
    pub compact_allowed: bool,
    pub default: Option<String>,
    pub about: String,
}

impl Field {
    /// The Rust type is `Option<..>` when the field is nullable in some version.
    pub fn is_option(&self) -> bool {
        self.ty.can_be_null() && !self.nullable.is_empty()
    }

    /// Kafka's default is null only when the spec says so.
    pub fn default_is_null(&self) -> bool {
        matches!(self.default.as_deref(), Some("null") | Some("None"))
    }
}

#[derive(Debug)]
pub struct Struct {
    pub name: String,
    pub fields: Vec<Field>,
}

/// One spec file, flattened: the top-level struct first, then every nested and
/// common struct, each once.
#[derive(Debug)]
pub struct Spec {
    pub name: String,
    pub kind: String,
    pub api_key: Option<i16>,
    pub valid: Versions,
    pub flexible: Versions,
    pub latest_version_unstable: bool,
    pub listeners: Vec<String>,
    pub structs: Vec<Struct>,
}

/// Removes `//` comments outside string literals.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(escaped) = chars.next() {
                    out.push(escaped);
                }
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '/' && chars.peek() == Some(&'/') {
            for skipped in chars.by_ref() {
                if skipped == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn default_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn convert_fields(
    raw: &[RawField],
    structs: &mut Vec<Struct>,
    seen: &mut HashMap<String, ()>,
) -> anyhow::Result<Vec<Field>> {
    let mut fields = Vec::with_capacity(raw.len());
    for f in raw {
        let ty = Ty::parse(&f.ty).with_context(|| format!("field {}", f.name))?;
        let versions_text = f.versions.as_deref().or(f.tagged_versions.as_deref()).unwrap_or("0+");
        let versions = Versions::parse(versions_text)?;
        let nullable = match &f.nullable_versions {
            Some(text) => Versions::parse(text)?,
            None => Versions::NONE,
        };
        let tagged = match (&f.tagged_versions, f.tag) {
            (Some(text), Some(tag)) => Some((tag, Versions::parse(text)?)),
            (None, None) => None,
            _ => bail!("field {} has a tag without taggedVersions or the reverse", f.name),
        };
        if !f.fields.is_empty() {
            let struct_name = match &ty {
                Ty::Struct(name) => name.clone(),
                Ty::Array(inner) => match inner.as_ref() {
                    Ty::Struct(name) => name.clone(),
                    _ => bail!("field {} has sub-fields but an array of primitives", f.name),
                },
                _ => bail!("field {} has sub-fields but a primitive type", f.name),
            };
            if seen.insert(struct_name.clone(), ()).is_some() {
                bail!("struct {struct_name} is defined twice");
            }
            let nested = convert_fields(&f.fields, structs, seen)?;
            structs.push(Struct { name: struct_name, fields: nested });
        }
        fields.push(Field {
            name: f.name.clone(),
            ty,
            versions,
            nullable,
            tagged,
            ignorable: f.ignorable,
            compact_allowed: f.flexible_versions.as_deref() != Some("none"),
            default: f.default.as_ref().map(default_text),
            about: f.about.clone(),
        });
    }
    Ok(fields)
}

pub fn load(path: &Path) -> anyhow::Result<Option<Spec>> {
    let text = std::fs::read_to_string(path)?;
    let raw: RawSpec =
        serde_json::from_str(&strip_comments(&text)).with_context(|| format!("parsing {}", path.display()))?;
    let valid = Versions::parse(&raw.valid_versions)?;
    if valid.is_empty() {
        // Messages Kafka 4 no longer speaks at all (LeaderAndIsr, StopReplica...).
        return Ok(None);
    }
    let flexible = match &raw.flexible_versions {
        Some(text) => Versions::parse(text)?,
        None => Versions::NONE,
    };
    let mut structs = Vec::new();
    let mut seen = HashMap::new();
    seen.insert(raw.name.clone(), ());
    for common in &raw.common_structs {
        if seen.insert(common.name.clone(), ()).is_some() {
            bail!("common struct {} is defined twice", common.name);
        }
        let fields = convert_fields(&common.fields, &mut structs, &mut seen)?;
        structs.push(Struct { name: common.name.clone(), fields });
    }
    let top_fields = convert_fields(&raw.fields, &mut structs, &mut seen)?;
    structs.insert(0, Struct { name: raw.name.clone(), fields: top_fields });
    Ok(Some(Spec {
        name: raw.name,
        kind: raw.kind,
        api_key: raw.api_key,
        valid,
        flexible,
        latest_version_unstable: raw.latest_version_unstable,
        listeners: raw.listeners,
        structs,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_stripped_outside_strings() {
        let text = "{ // note\n \"a\": \"http://x\" // trailing\n}";
        let v: serde_json::Value = serde_json::from_str(&strip_comments(text)).unwrap();
        assert_eq!(v["a"], "http://x");
    }

    #[test]
    fn versions() {
        assert_eq!(Versions::parse("3+").unwrap(), Versions { min: 3, max: i16::MAX });
        assert_eq!(Versions::parse("1-4").unwrap(), Versions { min: 1, max: 4 });
        assert_eq!(Versions::parse("7").unwrap(), Versions { min: 7, max: 7 });
        assert!(Versions::parse("none").unwrap().is_empty());
    }
}
