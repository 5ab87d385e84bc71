//! Topic-level configuration (placeholder, being filled in).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
    Class,
    Password,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    pub config_type: ConfigType,
    /// (name, value, source), most specific first, as DescribeConfigs reports them.
    pub synonyms: Vec<(String, Option<String>, ConfigSource)>,
}
