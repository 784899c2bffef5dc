package operator

import (
	"context"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// managerUser asks the API server who the manager's requests are
// authenticated as (a SelfSubjectReview, which every authenticated user
// may create). The answer is what the API server writes into the userInfo
// of the manager's own admission requests, the one part of a request no
// client can choose. "" when the API server cannot say: then no request is
// trusted to skip a mandatory SidecarSet, and the SidecarSet validation's
// dry-run pods may be injected by SidecarSets that select pods without
// labels.
func managerUser(cfg *rest.Config) string {
	log := ctrl.Log.WithName("setup")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "building a client to learn the manager's own username")
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		log.Error(err, "asking the API server for the manager's own username (SelfSubjectReview): mandatory SidecarSets may then inject the SidecarSet validation's dry-run pods")
		return ""
	}
	log.Info("the manager's requests are authenticated as", "username", r.Status.UserInfo.Username)
	return r.Status.UserInfo.Username
}
