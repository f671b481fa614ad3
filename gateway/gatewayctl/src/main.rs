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
            // Errors may quote data (an answer of the gateway, a row): sanitised like stdout.
            let text = match err.downcast_ref::<gatewayctl::Reported>() {
                Some(reported) => reported.to_string(),
                None => format!("{err:#}"),
            };
            eprintln!("gatewayctl: {}", common::display::multi_line(&text));
            ExitCode::FAILURE
        }
    }
}
