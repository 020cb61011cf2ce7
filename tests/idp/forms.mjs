// What both test identity providers share.

// A posted form's fields.
export function readForm(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (chunk) => { data += chunk; });
    req.on('end', () => resolve(new URLSearchParams(data)));
    req.on('error', reject);
  });
}
