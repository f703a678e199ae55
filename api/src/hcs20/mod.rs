//! Section C's routes. Each request is parsed into the generator's
//! [`Route`], whose canonical spelling names the pre-rendered file; a
//! parameter set no file covers (another page size, an account that never
//! held a token) is computed by the same query functions, from the model
//! the api loaded from the build's snapshot.

use hcs20::routes::Route;
use warp::http::StatusCode;

use crate::reply::{self, Answer, Error, Representation};
use crate::request::Request;
use crate::service::published;

pub async fn ticks(request: Request) -> Answer {
    answer(&request, Route::Ticks).await
}

pub async fn stats(request: Request) -> Answer {
    answer(&request, Route::Stats).await
}

pub async fn ecosystem_stats(request: Request) -> Answer {
    answer(&request, Route::EcosystemStats).await
}

pub async fn holders(request: Request) -> Answer {
    answer(&request, Route::holders(&request.query, request.app.limits)?).await
}

pub async fn transactions(request: Request) -> Answer {
    answer(&request, Route::transactions(&request.query, request.app.limits)?).await
}

pub async fn account(request: Request) -> Answer {
    answer(&request, Route::account(request.params.get("accountId"))?).await
}

/// The file of `route` if the build has one, else the answer computed.
async fn answer(request: &Request, route: Route) -> Answer {
    let build = request.build()?;
    if let Some(reply) = published(request, &route.canonical()).await {
        return Ok(reply);
    }
    let rendered = route
        .render(&build.analytics)
        .map_err(|unknown| Error::new(StatusCode::NOT_FOUND, "tick_not_found", unknown.to_string()))?;
    let representation = Representation::computed(rendered)?;
    Ok(reply::representation(&request.method, &request.headers, &representation))
}
