use clap::Parser;
use iolab::cli::{self, Cli, Cmd};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand) => e.exit(),
        Err(e) => {
            eprintln!("iolab: {}", cli::one_line_error(&e));
            std::process::exit(2);
        }
    };
    let code = match &cli.cmd {
        Cmd::Run(args) => cli::run::main(args),
        Cmd::Interfaces => cli::interfaces_cmd::main(),
        Cmd::Probe { target } => cli::probe::main(target.as_ref()),
    };
    std::process::exit(code);
}
