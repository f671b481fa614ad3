//! gatewayctl binary: parses the command line and runs [`gatewayctl::run`] on stdout.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gatewayctl::Cli::parse();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match gatewayctl::run(cli, &mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            use std::io::Write;
            let _ = out.flush();
            if let Some(reported) = err.downcast_ref::<gatewayctl::Reported>() {
                eprintln!("gatewayctl: {reported}");
            } else {
                eprintln!("gatewayctl: {err:#}");
            }
            ExitCode::FAILURE
        }
    }
}
