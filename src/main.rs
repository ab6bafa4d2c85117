use clap::Parser;
use iolab::cli::{self, Cli, Cmd};

fn main() {
    // Die quietly on a closed pipe (`iolab results | head`), like other command-line tools.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // A crash after system settings were changed puts them back (a panic here, an abort from
    // a restore process it starts) or says how.
    iolab::settings::crash::install();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        Err(e) => {
            eprintln!("iolab: {}", cli::one_line_error(&e));
            std::process::exit(2);
        }
    };
    let code = match &cli.cmd {
        Cmd::Run(args) => cli::run::main(args),
        Cmd::Interfaces => cli::interfaces_cmd::main(),
        Cmd::Probe { target, vfio_noiommu } => cli::probe::main(target.as_ref(), *vfio_noiommu),
        Cmd::Sweep(args) => cli::sweep::main(args),
        Cmd::Results(args) => cli::results::main(args),
        Cmd::Precondition(args) => cli::precondition::main(args),
        Cmd::Restore { after } => cli::serve::restore_main(*after),
        Cmd::Suite(cmd) => cli::suite::main(cmd),
        Cmd::Compare(args) => cli::compare::main(args),
        Cmd::Report(args) => cli::report::main(args),
        Cmd::Merge(args) => cli::merge::main(args),
        Cmd::Fleet(cmd) => cli::fleet::main(cmd),
        Cmd::Energy(cmd) => cli::energy::main(cmd),
        Cmd::Export(cmd) => cli::export::main(cmd),
        Cmd::Import(cmd) => cli::import::main(cmd),
        Cmd::Serve(args) => cli::serve::main(args),
        Cmd::Nbd(cmd) => cli::serve::nbd_main(cmd),
    };
    std::process::exit(code);
}
