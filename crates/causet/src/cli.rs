//! Command-line value parsers shared by the subcommands.

use causet_core::Protocol;
use clap::builder::{PossibleValuesParser, TypedValueParser};

/// Parses a `--protocol` value. clap is offered [`Protocol::ALL`]'s names, so `--help` lists them and a wrong name
/// is refused with them; the accepted name then goes through [`Protocol`]'s `FromStr`, the one place that maps
/// names to variants. The core crate stays free of clap, which is why this is not a `ValueEnum` derive there.
pub fn protocol() -> impl TypedValueParser<Value = Protocol> {
    PossibleValuesParser::new(Protocol::ALL.map(Protocol::name))
        .map(|name| name.parse::<Protocol>().expect("clap only passes on the names Protocol::ALL offered"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Args {
        #[arg(long, value_parser = protocol(), default_value = "cure")]
        protocol: Protocol,
        #[arg(long, value_parser = protocol(), value_delimiter = ',')]
        compare: Vec<Protocol>,
    }

    #[test]
    fn every_protocol_name_parses_and_the_default_is_cure() {
        for p in Protocol::ALL {
            let args = Args::try_parse_from(["t", "--protocol", p.name()]).expect("a valid name");
            assert_eq!(args.protocol, p);
        }
        assert_eq!(Args::try_parse_from(["t"]).expect("no flags").protocol, Protocol::Cure);
        let args = Args::try_parse_from(["t", "--compare", "cure,eventual"]).expect("a list");
        assert_eq!(args.compare, [Protocol::Cure, Protocol::Eventual]);
    }

    #[test]
    fn an_unknown_protocol_is_refused_with_the_valid_names() {
        let err = Args::try_parse_from(["t", "--protocol", "causal"]).expect_err("no such protocol");
        let message = err.to_string();
        assert!(message.contains("causal"), "{message}");
        assert!(message.contains("cure, gentlerain, eventual"), "{message}");
    }
}
